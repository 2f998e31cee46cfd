"""The data HierarchyEnv exchanges with trainers: layer descriptions, decisions, closed transitions."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np


@dataclass
class LayerInfo:
    """Static description of one layer's decision slots, spaces and schedule."""

    name: str
    index: int
    interval: int
    nodes: list
    slot_names: list[str]
    choice: str | None                 # None for the bottom layer
    obs_space: gym.spaces.Box          # the decision input of one slot
    action_space: gym.Space            # env actions (bottom) or the children's goal space
    feature_space: gym.spaces.Box      # a node's own features
    goal_feature_space: gym.spaces.Box | None
    max_children: int
    slot_roles: np.ndarray             # [S] int: unit index (bottom/broadcast) or child position (per_child)

    @property
    def n_slots(self) -> int:
        return len(self.slot_names)

    @property
    def obs_dim(self) -> int:
        return int(self.obs_space.shape[0])


@dataclass
class Decision:
    """A request for one layer's actions: obs [E, S, D] for the slots where mask [E, S] is True."""

    layer: int
    obs: np.ndarray
    mask: np.ndarray
    action_mask: np.ndarray | None = None
    t: np.ndarray | None = None


@dataclass
class LayerStep:
    """Transitions of one layer that closed at this env step, arrays [E, S]."""

    closed: np.ndarray
    reward: np.ndarray
    discount: np.ndarray       # gamma^k' for a continuing or truncated slot, 0 when terminal
    terminal: np.ndarray
    truncated: np.ndarray      # closed by a time limit: bootstrap from final_obs
    final_obs: np.ndarray | None = None


@dataclass
class StepResult:
    layers: list[LayerStep]
    env_rewards: np.ndarray    # [E, U] raw env rewards of the units
    done: np.ndarray           # [E] episodes that ended at this step
    episodes: list[dict] = field(default_factory=list)


Policy = Callable[[Decision], np.ndarray]
