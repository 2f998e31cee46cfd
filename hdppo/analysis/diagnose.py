"""`hdppo diagnose RUN`: one PNG per layer on how the run's workers differ.

Panels: (1) a PCA embedding of the decision states each worker's env copies visit, coloured by
worker; (2) coverage: the share of the embedding's occupied cells each worker reaches alone, and
how the union grows as workers are added; (3) gradient cosine of the workers to the aggregate and
(4) state / action divergence between workers, over training, from RUN/metrics/LAYER.csv.

The states are sampled now, by the run's final team playing from each worker's own env seeds
(the seeds training gave that worker), not stored during training.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.engine.metrics import read_csv, scope_file
from hdppo.errors import ConfigError
from hdppo.runfolder import load_run_config, resolve_scenario, team_checkpoints

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def run_workers(run: str | Path, config: dict[str, Any]) -> int:
    """How many workers the run trained with: recorded at start, else set, else counted from metrics files."""
    resolved = config.get("resolved", {}).get("workers")
    if resolved:
        return int(resolved)
    if int(config["train"].get("workers", 0)) > 0:
        return int(config["train"]["workers"])
    ids = {int(m.group(1)) for p in (Path(run) / "metrics").glob("*__worker_*.csv")
           if (m := re.search(r"__worker_(\d+)\.csv$", p.name))}
    return max(ids) + 1 if ids else 1


def sample_states(run: str | Path, workers: int, steps: int = 100, per_worker: int = 1500,
                  seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per layer: decision observations [n, D] of living deciding slots and the worker [n] that saw them."""
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.worker import Worker
    config = load_run_config(run)
    out: dict[str, list[tuple[np.ndarray, int]]] = {}
    rng = np.random.default_rng(seed)
    for w in range(workers):
        spec = WorkerSpec(resolve_scenario(run, config), config["scenario_overrides"], dict(config["train"]),
                          worker_id=w, trained=[], frozen=team_checkpoints(run, config))
        worker = Worker(spec, MemoryParams())
        seen: dict[str, list[np.ndarray]] = {}

        def act(d, worker=worker, seen=seen):
            seen.setdefault(worker.hier.info[d.layer].name, []).append(np.asarray(d.obs)[d.mask])
            return worker._act(d)
        try:
            for _ in range(steps):
                worker.hier.step(act)
        finally:
            worker.close()
        for layer, parts in seen.items():
            x = np.concatenate(parts)
            if len(x) > per_worker:
                x = x[rng.choice(len(x), per_worker, replace=False)]
            out.setdefault(layer, []).append((x, w))
    return {layer: (np.concatenate([x for x, _ in parts]), np.concatenate([np.full(len(x), w) for x, w in parts]))
            for layer, parts in out.items()}


def pca2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first two principal components of standardised x [n, D] and their explained variance ratios."""
    z = x - x.mean(axis=0)
    sd = z.std(axis=0)
    z = z / np.where(sd > 1e-8, sd, 1.0)
    _, s, vt = np.linalg.svd(z, full_matrices=False)
    var = s ** 2
    ratio = var[:2] / max(var.sum(), 1e-12)
    emb = z @ vt[:2].T
    if emb.shape[1] < 2:
        emb = np.concatenate([emb, np.zeros((len(emb), 2 - emb.shape[1]))], axis=1)
        ratio = np.concatenate([ratio, np.zeros(2 - len(ratio))])
    return emb, ratio


def coverage(emb: np.ndarray, worker: np.ndarray, bins: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Per worker, the share of all occupied cells (a bins x bins grid over the embedding) it reaches;
    and the union's share as workers 0..k are pooled."""
    lo, hi = emb.min(axis=0), emb.max(axis=0)
    cell = np.clip(((emb - lo) / np.maximum(hi - lo, 1e-12) * bins).astype(int), 0, bins - 1)
    ids = cell[:, 0] * bins + cell[:, 1]
    total = len(np.unique(ids))
    workers = np.unique(worker)
    own = np.array([len(np.unique(ids[worker == w])) / total for w in workers])
    union, seen = [], set()
    for w in workers:
        seen |= set(ids[worker == w].tolist())
        union.append(len(seen) / total)
    return own, np.array(union)


def report(run: str | Path, out: str | Path | None = None, steps: int = 100) -> list[Path]:
    """Write RUN/diagnose/LAYER.png (or under `out`) for every layer; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    run = Path(run)
    config = load_run_config(run)
    n = run_workers(run, config)
    states = sample_states(run, n, steps)
    folder = Path(out) if out is not None else run / "diagnose"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for layer in config["layer_names"]:
        if layer not in states:
            continue
        x, w = states[layer]
        emb, ratio = pca2(x)
        own, union = coverage(emb, w)
        rows = read_csv(run, layer) if scope_file(run, layer).is_file() else []
        fig, axes = plt.subplots(2, 2, figsize=(10, 8))
        ax = axes[0, 0]
        for k in np.unique(w):
            m = w == k
            ax.scatter(emb[m, 0], emb[m, 1], s=4, alpha=0.5, color=COLOURS[k % len(COLOURS)], label=f"worker {k}")
        ax.set_title(f"{layer}: decision states, PCA ({ratio[0]:.0%} + {ratio[1]:.0%} of variance)")
        ax.legend(fontsize=7, markerscale=3)
        ax = axes[0, 1]
        ks = np.arange(len(own))
        ax.bar(ks - 0.2, own, width=0.4, label="this worker alone")
        ax.plot(ks, union, "k-o", label="workers 0..k pooled")
        ax.set_ylim(0, 1.05)
        ax.set_xticks(ks)
        ax.set_xlabel("worker")
        ax.set_title("coverage: share of occupied PCA cells (20 x 20)")
        ax.legend(fontsize=7)
        _curves(axes[1, 0], rows, ("grad_cosine_mean", "grad_cosine_min"), "gradient cosine to the aggregate")
        _curves(axes[1, 1], rows, ("state_divergence", "action_divergence"), "divergence between workers")
        fig.suptitle(f"hdppo diagnose {run.name}: layer {layer}, {n} worker(s), {len(x)} states")
        fig.tight_layout()
        path = folder / f"{layer}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        paths.append(path)
    if not paths:
        raise ConfigError(f"no layer of run {run} decided in {steps} steps", "pass a larger --steps")
    return paths


def _curves(ax: Any, rows: list[dict[str, float]], keys: tuple[str, ...], title: str) -> None:
    drawn = False
    for key in keys:
        pts = [(r["step"], r[key]) for r in rows if key in r and not math.isnan(r[key])]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if len(pts) < 20 else None,
                    markersize=3, label=key)
            drawn = True
    ax.set_title(title)
    ax.set_xlabel("env steps")
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "not logged (one worker, or no update yet)", ha="center", va="center",
                transform=ax.transAxes, fontsize=8)
