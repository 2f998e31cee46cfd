"""Fixed policies for layers that are not trained: uniform goal samplers and random unit actions."""
from __future__ import annotations

import inspect
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from hdppo.team.interfaces import Decision, LayerInfo


def uniform_policy(info: LayerInfo, seed: int | None = None) -> Callable[[Decision], np.ndarray]:
    """Samples each slot's action uniformly from the layer's action space (honouring action masks)."""
    rng = np.random.default_rng(seed)
    space = info.action_space

    def act(d: Decision) -> np.ndarray:
        E, S = d.mask.shape
        if isinstance(space, gym.spaces.Discrete):
            if d.action_mask is not None:
                # sample among allowed actions: argmax of random keys on allowed entries
                keys = np.where(d.action_mask, rng.random(d.action_mask.shape), -1.0)
                return keys.argmax(axis=-1).astype(np.int64) + int(space.start)
            return rng.integers(space.n, size=(E, S)).astype(np.int64) + int(space.start)
        if isinstance(space, gym.spaces.MultiDiscrete):
            return (rng.random((E, S) + space.nvec.shape) * space.nvec).astype(np.int64)
        if isinstance(space, gym.spaces.Box):
            low = np.where(np.isfinite(space.low), space.low, -1.0)
            high = np.where(np.isfinite(space.high), space.high, 1.0)
            return (low + rng.random((E, S) + space.shape) * (high - low)).astype(space.dtype)
        raise TypeError(f"no uniform sampler for {space}")

    return act


def takes_rng(scripted: Callable[..., np.ndarray]) -> bool:
    """Whether a scripted controller draws at random: it takes a keyword `rng` (scripted(decision, rng=...))."""
    try:
        return "rng" in inspect.signature(scripted).parameters
    except (TypeError, ValueError):         # a builtin or C callable without a signature
        return False


def scripted_policy(info: LayerInfo, scripted: Callable[..., np.ndarray],
                    seed: int | None = None) -> Callable[[Decision], np.ndarray]:
    """Wraps a scenario's scripted controller so its output is checked like a policy's. A controller
    that takes a keyword `rng` (a random goal sampler) draws from its own numpy Generator seeded by
    `seed`, so a seeded run samples the same goals run to run."""
    if takes_rng(scripted):
        rng = np.random.default_rng(seed)

        def act_random(d: Decision) -> np.ndarray:
            return np.asarray(scripted(d, rng=rng))
        return act_random

    def act(d: Decision) -> np.ndarray:
        return np.asarray(scripted(d))
    return act
