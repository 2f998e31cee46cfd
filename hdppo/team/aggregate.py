"""Pure aggregation over the agent graph: children -> parents, masked by living children.

Every function takes per-env child index arrays `idx` [E, N, C] (into the layer below) and a
mask [E, N, C] (structural child present AND alive where that matters).
"""
from __future__ import annotations

import numpy as np


def gather_children(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """values [E, Nc, ...] -> [E, N, C, ...] picked by idx [E, N, C]."""
    return values[np.arange(idx.shape[0])[:, None, None], idx]


def masked_mean_max(features: np.ndarray, idx: np.ndarray,
                    mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and max of children's features [E, Nc, D] over masked children; zeros where none.

    Returns (mean [E, N, D], max [E, N, D], count [E, N]).
    """
    ch = gather_children(features, idx)                       # [E, N, C, D]
    m = mask[..., None]
    count = mask.sum(axis=2)
    total = np.where(m, ch, 0.0).sum(axis=2)
    mean = total / np.maximum(count, 1)[..., None]
    mx = np.where(m, ch, -np.inf).max(axis=2)
    mx = np.where(count[..., None] > 0, mx, 0.0)
    return mean.astype(np.float32), mx.astype(np.float32), count


def sum_children(values: np.ndarray, idx: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sum of children's values [E, Nc] over masked children -> [E, N]."""
    return np.where(mask, gather_children(values, idx), 0.0).sum(axis=2).astype(values.dtype)


def any_children(flags: np.ndarray, idx: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """True where any masked child's flag [E, Nc] is True -> [E, N]."""
    return (gather_children(flags, idx) & mask).any(axis=2)


def default_features(features: np.ndarray, alive: np.ndarray, idx: np.ndarray, struct: np.ndarray) -> np.ndarray:
    """A parent's default own features: [mean, max over living children, fraction of children alive]."""
    if alive.all() and struct.all():      # nobody dead and full groups: plain mean and max
        ch = gather_children(features, idx)
        ones = np.ones(idx.shape[:2] + (1,), dtype=np.float32)
        return np.concatenate([ch.mean(axis=2, dtype=np.float32), ch.max(axis=2), ones], axis=2)
    live = struct & gather_children(alive, idx)
    mean, mx, count = masked_mean_max(features, idx, live)
    frac = count / np.maximum(struct.sum(axis=2), 1)
    return np.concatenate([mean, mx, frac[..., None].astype(np.float32)], axis=2)


def one_hot(index: np.ndarray, n: int) -> np.ndarray:
    """int array [...] -> float32 [..., n]."""
    out = np.zeros(index.shape + (n,), dtype=np.float32)
    np.put_along_axis(out, index[..., None].astype(np.int64), 1.0, axis=-1)
    return out
