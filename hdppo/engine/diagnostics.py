"""Pure diagnostics across a layer's workers: how different their data and gradients are."""
from __future__ import annotations

import numpy as np


def state_divergence(means: list[np.ndarray], stds: list[np.ndarray]) -> float:
    """Mean over workers and features of |mean_w - mean_all| / (pooled std + 1e-6)."""
    if len(means) < 2:
        return float("nan")
    m = np.stack(means)
    s = np.stack(stds)
    pooled_mean = m.mean(axis=0)
    pooled_std = np.sqrt((s ** 2).mean(axis=0) + m.var(axis=0))
    return float((np.abs(m - pooled_mean) / (pooled_std + 1e-6)).mean())


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence (nats) of two distributions."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        nz = a > 0
        return float((a[nz] * np.log(a[nz] / b[nz])).sum())
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def action_divergence(hists: list[np.ndarray | None]) -> float:
    """Mean JS divergence of each worker's action histogram to the pooled histogram."""
    present = [h for h in hists if h is not None]
    if len(present) < 2:
        return float("nan")
    pooled = np.mean(present, axis=0)
    return float(np.mean([js_divergence(h, pooled) for h in present]))


def mean_ci(values: list[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean and a 95% bootstrap confidence interval."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = rng.choice(x, size=(n_boot, x.size), replace=True).mean(axis=1)
    return float(x.mean()), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))
