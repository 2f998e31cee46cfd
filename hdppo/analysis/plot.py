"""`hdppo plot`: learning curves of one or more runs as a PNG (matplotlib, no display needed).

Metrics come from every column of RUN/metrics/run.csv (team return, win, success, ...) and of the
per-layer CSVs (return, entropy, approx_kl, ...). A seed group folder (`hdppo train --seeds`)
stands for its runs. Runs whose config differs only in the seed (and in settings that do not change
training: the budget, `--no-progress`, ...) are drawn as their mean with a 95% band across seeds
(Student-t over the seeds at each step), cut to [0, 1] for a metric whose every value lies there.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.analysis.seed_group import expand_runs, is_group
from hdppo.engine.config import NOT_TRAINING
from hdppo.engine.metrics import read_csv, scope_file
from hdppo.errors import ConfigError

NOT_METRICS = {"step", "wall_time"}
Curve = tuple[np.ndarray, np.ndarray]


def _config(run: Path) -> dict[str, Any]:
    from hdppo.runfolder import load_run_config
    return load_run_config(run, need=("layer_names",))      # all plot needs; a damaged file is one line


def seed_group_key(config: dict[str, Any]) -> str:
    """What makes runs replicates of one config: everything in config.json but the seed, the resolved
    values and the settings that do not change training (the budget, `--no-progress`, intervals, ...)."""
    c = json.loads(json.dumps(config))
    train = c.get("train")
    if isinstance(train, dict):
        for key in ("seed", *NOT_TRAINING):
            train.pop(key, None)
    c.pop("resolved", None)
    return json.dumps(c, sort_keys=True)


def run_curves(run: Path, layers: list[str] | None = None) -> dict[str, dict[str, Curve]]:
    """{scope: {metric: (steps, values)}} for scope "run" and every layer with a metrics CSV."""
    config = _config(run)
    out: dict[str, dict[str, Curve]] = {}
    for scope in ["run"] + list(layers or config["layer_names"]):
        if not scope_file(run, scope).is_file():
            continue
        rows = _read(run, scope)
        metrics: dict[str, Curve] = {}
        for key in sorted({k for r in rows for k in r} - NOT_METRICS):
            pts = [(r["step"], r[key]) for r in rows if key in r and not math.isnan(r[key])]
            if pts:
                metrics[key] = (np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float))
        out[scope] = metrics
    return out


def _read(run: Path, scope: str) -> list[dict[str, float]]:
    """A metrics CSV's rows, or a ConfigError naming the file when it is not one (garbage, cut short)."""
    import csv
    path = scope_file(run, scope)
    try:
        rows = read_csv(run, scope)
    except UnicodeDecodeError as exc:
        why = f"it is not text (byte {exc.start})"
    except (ValueError, TypeError, csv.Error) as exc:
        why = f"a row does not parse ({exc})"
    else:
        if rows and not all(isinstance(r.get("step"), int) for r in rows):
            why = "it has no `step` column"
        else:
            return rows
    raise ConfigError(f"metrics file {path} cannot be plotted: {why}",
                      f"restore it, or move it aside to plot the run without {scope}'s curves")


def band(curves: list[Curve], points: int = 100,
         bounds: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seeds' curves on a common step grid (each inside its own range): mean and a 95% t band, cut
    to `bounds` where the metric cannot leave them (a rate in [0, 1])."""
    from scipy.stats import t
    lo_x = max(c[0][0] for c in curves)
    hi_x = min(c[0][-1] for c in curves)
    if hi_x <= lo_x:
        hi_x = max(c[0][-1] for c in curves)
    grid = np.linspace(lo_x, hi_x, points) if hi_x > lo_x else np.array([lo_x])
    ys = np.stack([np.where((grid >= x[0]) & (grid <= x[-1]), np.interp(grid, x, y), np.nan) for x, y in curves])
    n = np.sum(np.isfinite(ys), axis=0)
    mean = np.nanmean(ys, axis=0)
    sd = np.nanstd(ys, axis=0, ddof=1) if len(curves) > 1 else np.zeros_like(mean)
    half = np.where(n > 1, t.ppf(0.975, np.maximum(n - 1, 1)) * np.nan_to_num(sd) / np.sqrt(np.maximum(n, 1)), 0.0)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
    return grid, mean, lo, hi


def metric_bounds(curves: list[Curve]) -> tuple[float, float] | None:
    """(0, 1) when every value of every seed lies in [0, 1] (win, success and goal-success rates, a
    0/1 return): the band is cut there instead of promising rates below 0 or above 1."""
    values = np.concatenate([y for _, y in curves])
    return (0.0, 1.0) if len(values) and values.min() >= 0.0 and values.max() <= 1.0 else None


def panels_for(data: dict[Path, dict[str, dict[str, Curve]]], metrics: tuple[str, ...]) -> list[tuple[str, str]]:
    """(scope, metric) panels: each metric in every scope (run, then the layers) where some run has it."""
    scopes = dict.fromkeys(s for d in data.values() for s in d)
    return [(scope, m) for m in metrics for scope in scopes if any(m in d.get(scope, {}) for d in data.values())]


def default_out(runs: list[Path]) -> Path:
    """Next to the run: RUN/curves.png for one run, the runs' common folder for several."""
    if len(runs) == 1:
        return runs[0] / "curves.png"
    parents = {r.resolve().parent for r in runs}
    return (parents.pop() if len(parents) == 1 else runs[0]) / "curves.png"


def group_label(members: list[Path]) -> str:
    """A group of seeds' name: its seed group folder's when every member is in one, else its first run's."""
    parents = {m.parent for m in members}
    return parents.pop().name if len(parents) == 1 and is_group(members[0].parent) else members[0].name


def plot_runs(runs: list[str | Path], out: str | Path | None = None,
              metrics: tuple[str, ...] = ("return", "goal_success"), layers: list[str] | None = None,
              strict: bool = False) -> Path:
    """One panel per (scope, metric) -- scope "run" or a layer -- with one line per run, or per group of
    seeds with a band; x is env steps. With `strict`, every metric must exist somewhere. Returns the PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = expand_runs(runs)                  # a seed group folder (`hdppo train --seeds`) is its runs
    data = {p: run_curves(p, layers) for p in paths}
    groups: dict[str, list[Path]] = {}
    for p in paths:
        groups.setdefault(seed_group_key(_config(p)), []).append(p)
    valid = sorted({m for d in data.values() for scope in d.values() for m in scope})
    unknown = [m for m in metrics if not any(m in scope for d in data.values() for scope in d.values())]
    if (strict and unknown) or len(unknown) == len(metrics):
        raise ConfigError(f"metric {unknown[0]!r} is in none of the runs' metrics CSVs",
                          f"choose --metric from: {', '.join(valid) or '(no metrics written yet: train first)'}")
    panels = panels_for(data, metrics)
    cols = min(len(panels), 3)
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 3.5 * rows_n), squeeze=False)
    for ax, (scope, metric) in zip(axes.flat, panels):
        for members in groups.values():
            curves = [data[p][scope][metric] for p in members if metric in data[p].get(scope, {})]
            if not curves:
                continue
            if len(curves) == 1:
                x, y = curves[0]
                ax.plot(x, y, marker="o" if len(x) < 20 else None, markersize=4, label=members[0].name)
                continue
            grid, mean, lo, hi = band(curves, bounds=metric_bounds(curves))
            line, = ax.plot(grid, mean, marker="o" if len(grid) == 1 else None,
                            label=f"{group_label(members)} (mean of {len(curves)} seeds, 95% band)")
            ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.2)
        ax.set_title(f"{scope}: {metric}")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        if len(groups) > 1 or any(len(m) > 1 for m in groups.values()):
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    out = Path(out) if out is not None else default_out(paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
