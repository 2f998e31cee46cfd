"""Running reward normalisation per worker and layer: rewards scaled by the std of discounted returns."""
from __future__ import annotations

import numpy as np


class RunningMeanStd:
    """Streaming mean and variance (parallel-merge form), float64."""

    def __init__(self) -> None:
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def update(self, x: np.ndarray) -> None:
        if x.size == 0:
            return
        b_count = x.size
        b_mean = float(np.add.reduce(x, axis=None)) / b_count
        d = x - b_mean
        self.merge(b_count, b_mean, float(np.add.reduce(d * d, axis=None)) / b_count)

    def merge(self, b_count: float, b_mean: float, b_var: float) -> None:
        """Fold in a batch known by its count, mean and (population) variance."""
        if b_count <= 0:
            return
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean += delta * b_count / total
        self.var = (self.var * self.count + b_var * b_count + delta ** 2 * self.count * b_count / total) / total
        self.count = total


class RewardNormalizer:
    """Tracks each slot's discounted return (semi-MDP: discounted by each transition's gamma^k) and
    divides rewards by the running std of those returns."""

    def __init__(self, n_envs: int, n_slots: int, enabled: bool = True, eps: float = 1e-8) -> None:
        self.enabled = enabled
        self.ret = np.zeros((n_envs, n_slots), dtype=np.float64)
        self.rms = RunningMeanStd()
        self.eps = eps

    def __call__(self, closed: np.ndarray, rewards: np.ndarray, discounts: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """Normalised rewards of the closed slots; `ended` resets a slot's return after this step."""
        if not self.enabled:
            return rewards
        self.ret[closed] += rewards[closed]          # ret was already discounted when the last transition closed
        self.rms.update(self.ret[closed])
        out = rewards / np.sqrt(self.rms.var + self.eps)
        self.ret[closed] *= np.where(ended[closed], 0.0, discounts[closed])
        return out.astype(np.float32)

    @property
    def scale(self) -> float:
        """What rewards are divided by now (1 when disabled)."""
        return float(np.sqrt(self.rms.var + self.eps)) if self.enabled else 1.0
