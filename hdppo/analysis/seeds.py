"""Aggregates across training seeds, as rliable (Agarwal et al., 2021) defines them: the interquartile
mean (IQM) with a stratified-bootstrap interval, beside the plain mean with a Student-t interval.

A score matrix is runs x tasks (here: seeds x 1, one scenario). The IQM is the mean of the middle
50% of all its scores (`scipy.stats.trim_mean(scores, 0.25)` on the flattened matrix, as
`rliable.metrics.aggregate_iqm`); the stratified bootstrap redraws the runs with replacement within
each task and takes the percentile interval of the statistic over the redraws (rliable's
`get_interval_estimates` default). Every interval is (value, low, high) at 95%.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hdppo.stats import CI, NAN, t_ci

BOOTSTRAP_REPS = 50_000        # rliable's default number of redraws


def iqm(scores: Any, axis: int | None = None) -> Any:
    """The interquartile mean: the mean after cutting 25% of the scores at each end (of the whole
    matrix, or along `axis`); [1, 2, 3, 4, 10] gives 3.0, range(8) gives 3.5."""
    from scipy.stats import trim_mean
    x = np.asarray(scores, dtype=np.float64)
    return trim_mean(x.ravel() if axis is None else x, 0.25, axis=0 if axis is None else axis)


def stratified_bootstrap_ci(scores: Any, statistic: Callable[..., Any] = iqm, confidence: float = 0.95,
                            reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float]:
    """The percentile interval of `statistic` (called as `statistic(batch, axis=1)` on redraws
    flattened to rows) over `reps` redraws of the runs (rows of a runs x tasks matrix, or a 1-D
    array of runs), each task's runs drawn with replacement independently. Seeded: the same
    arguments give the same interval."""
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    n, tasks = x.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=(reps, n, tasks))                      # runs redrawn within each task
    redrawn = np.take_along_axis(np.broadcast_to(x, (reps, n, tasks)), rows, axis=1)
    values = np.asarray(statistic(redrawn.reshape(reps, n * tasks), axis=1), dtype=np.float64)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def iqm_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> CI:
    """The IQM of one value per seed with its stratified-bootstrap interval (NaNs dropped; one
    value, or no spread, has no width)."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return NAN
    m = float(iqm(x))
    if x.size == 1 or np.all(x == x[0]):
        return m, m, m
    lo, hi = stratified_bootstrap_ci(x, iqm, confidence, seed=seed)
    return m, lo, hi


def across_seeds(values: Sequence[float], bounds: tuple[float, float] | None = None) -> dict[str, CI]:
    """{"mean": mean with a t interval, "iqm": IQM with a stratified-bootstrap interval} of one
    value per seed; `bounds` cut the t interval where the metric cannot go (a rate in [0, 1])."""
    m, lo, hi = t_ci(values)
    if bounds is not None and np.isfinite(m):
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return {"mean": (m, lo, hi), "iqm": iqm_ci(values)}


def eval_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """One evaluation's (hdppo.runtime.evaluate) means by metric: team_return, return/LAYER,
    length and each outcome."""
    out = {"team_return": result["team_return"][0]}
    out.update({f"return/{layer}": ci[0] for layer, ci in result["layers"].items()})
    out["length"] = result["length"][0]
    out.update({key: ci[0] for key, ci in result["outcomes"].items()})
    return {k: float(v) for k, v in out.items()}


def aggregate_evals(per_seed: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every metric of the seeds' evaluations across the seeds: {metric: {"per_seed": {seed: mean},
    "mean": CI, "iqm": CI}}. An outcome whose every seed lies in [0, 1] is a rate: its t interval
    stays there."""
    means = {seed: eval_metrics(res) for seed, res in per_seed.items()}
    outcomes = {k for res in per_seed.values() for k in res["outcomes"]}
    metrics = list(dict.fromkeys(k for m in means.values() for k in m))
    out: dict[str, dict[str, Any]] = {}
    for key in metrics:
        values = {seed: m[key] for seed, m in means.items() if key in m}
        rate = key in outcomes and all(0.0 <= v <= 1.0 for v in values.values())
        out[key] = {"per_seed": values, **across_seeds(list(values.values()), (0.0, 1.0) if rate else None)}
    return out
