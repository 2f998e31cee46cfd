"""Turning a policy head's outputs into env actions with numpy (shared by the torch and ONNX runtimes)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np


def to_space(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Policy outputs as the env takes them: Box samples clipped into the Box and shaped like it."""
    if isinstance(space, gym.spaces.Box):
        shaped = actions.reshape(actions.shape[:2] + space.shape)
        return np.clip(shaped, space.low, space.high).astype(space.dtype)
    return actions


def masked_logits(logits: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Logits [B, n] with disallowed actions at -inf; a row that allows nothing stays unmasked."""
    if mask is None:
        return logits
    m = np.asarray(mask, bool)
    m = m | ~m.any(axis=-1, keepdims=True)
    return np.where(m, logits, -np.inf)


def pick(logits: np.ndarray, mask: np.ndarray | None, rng: np.random.Generator | None) -> np.ndarray:
    """The most likely action per row (rng None), or a sample from the softmax, int64 [B]."""
    z = masked_logits(logits.astype(np.float64), mask)
    if rng is None:
        return z.argmax(axis=-1)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return (p.cumsum(axis=-1) > rng.random((len(p), 1))).argmax(axis=-1)
