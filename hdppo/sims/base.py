"""Batched environments: many env copies stepped as arrays over (copy, unit).

`BatchedEnv` is the interface the hierarchy steps; every simulator adapter in `hdppo.sims`
implements it. Native simulators implement it with numpy over all copies at once (`NumpyBatch`,
seeded per copy with `copy_rngs`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import gymnasium as gym
import numpy as np


@dataclass
class EnvStep:
    """What one step of all copies returns; arrays over [E, U] units unless noted."""

    rewards: np.ndarray      # float32 env rewards (0 for units not alive before the step)
    terminated: np.ndarray   # bool: the unit ended this step without bootstrap (death, win, loss)
    truncated: np.ndarray    # bool: the unit ended this step by a time limit (bootstrap)
    done: np.ndarray         # bool [E]: the copy's episode is over for the team


class BatchedEnv(ABC):
    """E env copies of U trained units. Subclasses fill the attributes and implement the methods.

    After `reset`/`step`, `obs` [E, U, D] float32 holds each unit's flat observation (a dead unit
    keeps its last one), `alive` [E, U] bool says which units still act, and `action_mask`
    [E, U, A] bool (or None) says which actions each unit may take.
    """

    n_envs: int
    units: list[str]
    obs_space: gym.spaces.Box          # per unit, flat
    action_space: gym.Space            # per unit (padded to the largest)
    state_space: gym.spaces.Box | None = None
    obs: np.ndarray
    alive: np.ndarray
    action_mask: np.ndarray | None = None

    @abstractmethod
    def reset(self, seed: int | None = None) -> None:
        """Start new episodes in every copy (copy e seeded with seed + e when seed is given)."""

    @abstractmethod
    def reset_done(self, mask: np.ndarray) -> None:
        """Start new episodes in the copies where mask [E] is True."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> EnvStep:
        """Step every copy; actions [E, U] (Discrete) or [E, U, A]; dead units' actions are ignored."""

    def state(self) -> np.ndarray:
        """Global state [E, Ds] for centralized layers; only when state_space is set."""
        from hdppo.errors import ScenarioError
        raise ScenarioError(f"{type(self).__name__} has no global state",
                            "set use_state=False on the layer, or give the env a state() method")

    def episode_info(self, env_index: int) -> dict[str, float]:
        """Scenario metrics of a copy whose episode just ended (e.g. win), read before its reset."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional: an env that holds nothing to release keeps this no-op
        pass


def copy_rngs(seed: int | None, n: int) -> list[np.random.Generator]:
    """One numpy Generator per env copy: copy e seeded with seed + e, or fresh entropy without a seed."""
    if seed is None:
        return [np.random.default_rng(s) for s in np.random.SeedSequence().spawn(n)]
    return [np.random.default_rng(seed + e) for e in range(n)]


class NumpyBatch(BatchedEnv):
    """A native batch whose copies each draw from their own Generator `self._rng[e]` (see copy_rngs),
    so E copies stepped together equal E single copies with the same seeds."""

    _rng: list[np.random.Generator]

    def reset(self, seed: int | None = None) -> None:
        """New episodes everywhere; with a seed copy e restarts from seed + e, else streams continue."""
        if seed is not None:
            self._rng = copy_rngs(seed, self.n_envs)
        self.reset_done(np.ones(self.n_envs, bool))


def flat_space(space: gym.Space) -> gym.spaces.Box:
    """A flat float32 Box for a unit's observation space."""
    if isinstance(space, gym.spaces.Box):
        return gym.spaces.Box(space.low.reshape(-1).astype(np.float32), space.high.reshape(-1).astype(np.float32),
                              dtype=np.float32)
    box = gym.spaces.flatten_space(space)
    if not isinstance(box, gym.spaces.Box):     # Graph and Sequence spaces vary in size
        from hdppo.errors import ScenarioError
        raise ScenarioError(f"observation space {space} has no fixed-size flat form",
                            "give units Box, Discrete, MultiDiscrete, or Tuple / Dict of those as observations")
    return gym.spaces.Box(box.low.astype(np.float32), box.high.astype(np.float32), dtype=np.float32)
