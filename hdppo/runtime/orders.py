"""The caller's orders to a loaded team: `{node: goal}` checked against each node's goal space and
grouped by the layer that receives them (see Team.act)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError


def check_goal(node: str, value: Any, space: gym.Space) -> np.ndarray:
    """`value` as the goal array of `space` (an int for Discrete, a float32 array for Box), or a
    ConfigError naming the node, the value and the space."""
    if isinstance(space, gym.spaces.Discrete):
        ok = np.ndim(value) == 0 and float(value) == int(value) and space.contains(np.int64(value))
        if ok:
            return np.asarray(int(value), np.int64)
        want = f"an int in {int(space.start)}..{int(space.start + space.n - 1)}"
    else:
        assert isinstance(space, gym.spaces.Box)      # goal spaces are Discrete or Box (Scenario.build_layers)
        goal = np.asarray(value, np.float32)
        if goal.shape == space.shape and space.contains(goal):
            return goal
        want = f"an array of shape {space.shape} within the Box's bounds"
    raise ConfigError(f"goal {value!r} for node {node!r} is not in its goal space {space}", f"give {want}")


def group_orders(goals: Mapping[str, Any], receivers: Mapping[str, tuple[int, int]],
                 spaces: list[gym.Space | None]) -> dict[int, dict[int, np.ndarray]]:
    """{layer index: {node index: goal}} of `goals` {node: goal}; receivers maps each node that
    receives goals to (its layer index, its index there), spaces[i] is layer i's goal space."""
    out: dict[int, dict[int, np.ndarray]] = {}
    for node, value in goals.items():
        where = receivers.get(str(node))
        if where is None:
            names = list(receivers)
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ConfigError(f"node {node!r} receives no goals (the top layer's nodes and names not in the "
                              f"team have none)", f"order one of {shown} (team.layers lists every node)")
        i, k = where
        space = spaces[i - 1]
        assert space is not None                      # every layer above the receiver's has a goal space
        out.setdefault(i, {})[k] = check_goal(str(node), value, space)
    return out
