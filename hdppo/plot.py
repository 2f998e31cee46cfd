"""`hdppo plot`: learning curves of one or more runs as a PNG (matplotlib, no display needed)."""
from __future__ import annotations

import math
from pathlib import Path

from .errors import ConfigError
from .metrics import read_csv, scope_file


def plot_runs(runs: list[str | Path], out: str | Path, metrics: tuple[str, ...] = ("return", "goal_success"),
              layers: list[str] | None = None) -> Path:
    """One panel per (layer, metric) with one line per run; x is env steps. Returns the PNG path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, str]] = []
    data: dict[tuple[str, str], list[tuple[str, list[float], list[float]]]] = {}
    for run in runs:
        run = Path(run)
        if not (run / "config.json").is_file():
            raise ConfigError(f"{run} is not an hdppo run folder (no config.json)", "pass --out folders of `hdppo train`")
        import json
        names = layers or json.loads((run / "config.json").read_text())["layer_names"]
        for layer in names:
            if not scope_file(run, layer).is_file():
                continue
            rows = read_csv(run, layer)
            for metric in metrics:
                pts = [(r["step"], r[metric]) for r in rows if metric in r and not math.isnan(r[metric])]
                if not pts:
                    continue
                key = (layer, metric)
                if key not in data:
                    panels.append(key)
                    data[key] = []
                data[key].append((run.name, [p[0] for p in pts], [p[1] for p in pts]))
    if not panels:
        raise ConfigError(f"no {', '.join(metrics)} metrics found in {', '.join(map(str, runs))}",
                          "train first, or choose --metric from the columns of RUN/metrics/LAYER.csv")
    cols = min(len(panels), 3)
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5 * cols, 3.5 * rows_n), squeeze=False)
    for ax, key in zip(axes.flat, panels):
        for label, xs, ys in data[key]:
            ax.plot(xs, ys, label=label)
        ax.set_title(f"{key[0]}: {key[1]}")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
