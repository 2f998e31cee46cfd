"""Observations of the wrong shape are refused naming the unit, the env copy and the step.

On the code before the shape checks a scalar observation for a (4,) space was broadcast into all
four features and training exited 0 (inline and process backends); a length-5 one failed with
numpy's "could not broadcast", naming neither unit nor step (a raw traceback on inline)."""
from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv

from hdppo.errors import ScenarioError
from hdppo.sims.base import EnvStep
from hdppo.sims.pettingzoo import PettingZooBatch
from hdppo.team.guards import check_shapes
from tests.helpers import TESTS

SHAPE_ENV = TESTS / "fixtures" / "broken_env.py"


@pytest.mark.parametrize("bad,backend", [("scalar", "inline"), ("scalar", "process"), ("long", "inline"),
                                         ("long", "process")])
def test_training_stops_on_a_wrong_observation_shape_naming_unit_copy_and_step(bad, backend, tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "hdppo.cli", "train", str(SHAPE_ENV), f"fault={bad}", "--steps", "200",
                           "--backend", backend, "--workers", "1", "--seed", "0", "--no-progress",
                           "envs_per_worker=2", "rollout=16", "--out", str(run)],
                          capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert "Traceback" not in text
    shape = "()" if bad == "scalar" else "(5,)"
    assert (f"unit 'u1' an observation of shape {shape}, but its space has shape (4,) (copy 0, at episode step 3)"
            in proc.stderr), proc.stderr
    assert "fix:" in proc.stderr


class Odd(ParallelEnv):
    """One unit observing Box(3,) (or, with `masked`, a dict with a 4-action mask); `ob` is what it returns."""

    metadata = {"name": "odd"}
    possible_agents = ["a"]

    def __init__(self, ob, masked: bool = False) -> None:
        self.ob, self.masked, self.agents = ob, masked, []

    def observation_space(self, agent):
        box = gym.spaces.Box(-1, 1, (3,), np.float32)
        if self.masked:
            return gym.spaces.Dict({"observation": box, "action_mask": gym.spaces.MultiBinary(4)})
        return box

    def action_space(self, agent):
        return gym.spaces.Discrete(4)

    def reset(self, seed=None, options=None):
        self.agents = ["a"]
        return {"a": self.ob}, {"a": {}}


@pytest.mark.parametrize("ob", [np.float32(0.5), np.zeros(4, np.float32), np.zeros((1, 3), np.float32)],
                         ids=["scalar", "long", "extra-axis"])
def test_the_adapter_refuses_a_wrong_shape_at_reset(ob):
    batch = PettingZooBatch(lambda: Odd(ob), ["a"], n_envs=2)
    with pytest.raises(ScenarioError) as info:
        batch.reset(seed=0)
    assert "unit 'a' an observation of shape" in info.value.problem and "(copy 0, at its reset)" in info.value.problem
    np.testing.assert_array_equal(batch.obs, 0.0)                   # nothing was broadcast into the features


def test_the_adapter_refuses_an_action_mask_of_the_wrong_shape():
    batch = PettingZooBatch(lambda: Odd({"observation": np.zeros(3, np.float32), "action_mask": np.int8(1)},
                                        masked=True), ["a"], n_envs=1)
    with pytest.raises(ScenarioError, match=r"action mask of shape \(\), but its space has shape \(4,\)"):
        batch.reset(seed=0)


def test_a_native_batch_with_misshapen_arrays_is_refused():
    """A native BatchedEnv's own arrays: rewards [E] instead of [E, U] would broadcast over the units."""
    class Native:
        n_envs, units = 2, ["u0", "u1", "u2"]
        obs_space = gym.spaces.Box(-1, 1, (4,), np.float32)
        obs = np.zeros((2, 3, 4), np.float32)
        alive = np.ones((2, 3), bool)
    env, t = Native(), np.array([5, 7])
    ok = EnvStep(np.zeros((2, 3), np.float32), np.zeros((2, 3), bool), np.zeros((2, 3), bool), np.zeros(2, bool))
    check_shapes(env, t, "native", ok)                                 # type: ignore[arg-type]
    bad = EnvStep(np.zeros(2, np.float32), ok.terminated, ok.truncated, ok.done)
    with pytest.raises(ScenarioError, match=r"rewards array has shape \(2,\), expected \(2, 3\)"):
        check_shapes(env, t, "native", bad)                            # type: ignore[arg-type]
    env.obs = np.zeros((2, 3, 5), np.float32)
    with pytest.raises(ScenarioError, match=r"obs array has shape \(2, 3, 5\), expected \(2, 3, 4\)"):
        check_shapes(env, t, "native")                                 # type: ignore[arg-type]
