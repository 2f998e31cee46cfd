"""Confidence intervals a user can trust: exact binomial for rates, bootstrap for means, across seeds
for multi-seed summaries. Every interval is (mean, low, high) at 95%."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CI = tuple[float, float, float]
NAN: CI = (float("nan"), float("nan"), float("nan"))


def rate_ci(successes: int, n: int, confidence: float = 0.95) -> CI:
    """A rate k/n with its exact (Clopper-Pearson) interval: 0 of 20 gives (0, 0, 0.168)."""
    from scipy.stats import binomtest
    if n <= 0:
        return NAN
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence, method="exact")
    return successes / n, float(ci.low), float(ci.high)


def mean_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> CI:
    """A mean with a percentile bootstrap interval (scipy); a constant sample has a zero-width one."""
    from scipy.stats import bootstrap
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return NAN
    m = float(x.mean())
    if x.size == 1 or np.all(x == x[0]):
        return m, m, m
    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(seed))
    return m, float(res.confidence_interval.low), float(res.confidence_interval.high)


def is_binary(values: Sequence[float]) -> bool:
    x = np.asarray(values, dtype=np.float64)
    return x.size > 0 and bool(np.isin(x, (0.0, 1.0)).all())


def outcome_ci(values: Sequence[float], confidence: float = 0.95) -> CI:
    """Per-episode values: an exact rate interval when they are all 0/1 (win, success), else bootstrap."""
    x = [float(v) for v in values if np.isfinite(v)]
    if is_binary(x):
        return rate_ci(int(sum(x)), len(x), confidence)
    return mean_ci(x, confidence)


def seeds_ci(per_seed: Sequence[Sequence[float]], confidence: float = 0.95) -> CI:
    """The mean over seeds of each seed's mean, with a Student-t interval across the seed means (the
    seeds are the independent replicates, not the pooled episodes); one seed falls back to its episodes."""
    groups = [[float(v) for v in g if np.isfinite(v)] for g in per_seed]
    groups = [g for g in groups if g]
    if not groups:
        return NAN
    if len(groups) == 1:
        return outcome_ci(groups[0], confidence)
    m, lo, hi = t_ci([float(np.mean(g)) for g in groups], confidence)
    if all(is_binary(g) for g in groups):           # rates stay in [0, 1]
        lo, hi = max(lo, 0.0), min(hi, 1.0)
    return m, lo, hi


def t_ci(values: Sequence[float], confidence: float = 0.95) -> CI:
    """The mean of independent replicates (e.g. one value per seed) with a Student-t interval, n - 1
    degrees of freedom: [1, 2, 3] gives (2, -0.484, 4.484). One value, or no spread, has no width."""
    from scipy.stats import t
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return NAN
    m = float(x.mean())
    sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    if sd == 0.0:
        return m, m, m
    half = float(t.ppf(0.5 + confidence / 2, x.size - 1) * sd / np.sqrt(x.size))
    return m, m - half, m + half


def diff_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> CI:
    """mean(a) - mean(b) for two independent groups of replicates (e.g. seeds of two methods), with a
    Welch t interval (unequal variances, Welch-Satterthwaite degrees of freedom); needs 2+ values each."""
    from scipy.stats import t
    x = np.asarray([v for v in a if np.isfinite(v)], dtype=np.float64)
    y = np.asarray([v for v in b if np.isfinite(v)], dtype=np.float64)
    if x.size < 2 or y.size < 2:
        return NAN
    d = float(x.mean() - y.mean())
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = float(np.sqrt(vx + vy))
    if se == 0.0:
        return d, d, d
    dof = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
    half = float(t.ppf(0.5 + confidence / 2, dof)) * se
    return d, d - half, d + half
