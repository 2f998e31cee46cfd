"""HostEnv.write: the caller's observations and masks land in the rows the hierarchy reads."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from hdppo.errors import ConfigError
from hdppo.runtime.host_env import HostEnv, UnitSpaces

UNITS = ["a", "b", "c"]


def _env() -> HostEnv:
    obs = gym.spaces.Box(-1, 1, (2,), np.float32)
    base = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1]], bool)      # b's last action is padding
    return HostEnv(UnitSpaces(UNITS, ["enemy"], obs, gym.spaces.Discrete(4), {u: obs for u in UNITS},
                              {u: gym.spaces.Discrete(4) for u in UNITS}, None, base))


def test_masks_come_from_the_observation_else_the_info_and_keep_the_padding():
    env = _env()
    env.write({"a": [0.1, 0.2], "b": {"observation": [0.3, 0.4], "action_mask": [0, 1, 1, 1]}, "c": [0.5, 0.6],
               "enemy": [9.0]},
              {"a": {"action_mask": np.array([1, 0, 1, 1], np.int8)}, "b": {"action_mask": [1, 1, 1, 1]}})
    np.testing.assert_array_equal(env.obs[0], np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], np.float32))
    np.testing.assert_array_equal(env.action_mask[0], [[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]])
    env.write({"c": [0.7, 0.8]}, {"c": {"action_mask": [0, 0, 0, 1]}}, agents=["a", "c"])
    np.testing.assert_array_equal(env.obs[0, :2], np.array([[0.1, 0.2], [0.3, 0.4]], np.float32))   # kept
    np.testing.assert_array_equal(env.action_mask[0], [[1, 0, 1, 1], [0, 1, 1, 0], [0, 0, 0, 1]])
    assert env.alive[0].tolist() == [True, False, True]


def test_a_non_finite_observation_is_refused_naming_the_unit():
    env = _env()
    with pytest.raises(ConfigError, match="unit 'b' holds a non-finite value"):
        env.write({"a": [0.0, 0.0], "b": [np.nan, 0.0], "c": [0.0, np.inf]})
