"""spread attend=true: each unit observes only the landmark its squad gave it, in training and deployed."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.scenarios.spread import LANDMARK_OFFSET
from hdppo.team.check import run_check
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario

N = 6                                  # the default: 6 agents, 6 landmarks
BLOCK = slice(LANDMARK_OFFSET, LANDMARK_OFFSET + 2 * N)


def recorder(hier: HierarchyEnv, seen: list, seed: int = 11):
    """A policy for every layer (uniform, seeded) that records the units' decision observations."""
    pols = [uniform_policy(inf, seed + inf.index) for inf in hier.info]

    def act(d):
        if d.layer == hier.n_layers - 1:
            seen.append((d.obs[0].copy(), hier.env.obs[0].copy(), hier.goals[-1][0].copy()))
        return pols[d.layer](d)
    return act


def training_obs(overrides: dict, steps: int = 50, seed: int = 2) -> list:
    sc = load_scenario("spread")
    hier = HierarchyEnv(sc, sc.make_config(overrides), n_envs=1, seed=seed)
    seen: list = []
    act = recorder(hier, seen)
    for _ in range(steps):
        hier.step(act)
    return seen


@pytest.mark.parametrize("layers", ["3", "2"])
def test_a_unit_observes_itself_the_others_and_only_its_goal_landmark(layers) -> None:
    seen = training_obs({"attend": "true", "layers": layers})
    goals = [g for _, _, g in seen]
    assert any((a != b).any() for a, b in itertools.pairwise(goals)), "the goals never changed"
    for obs, env_obs, goal in seen:
        keep = np.repeat(np.arange(N) == goal[:, None], 2, axis=1)                    # [U, 2N]
        np.testing.assert_array_equal(obs[:, BLOCK], np.where(keep, env_obs[:, BLOCK], 0))
        np.testing.assert_array_equal(obs[:, :LANDMARK_OFFSET], env_obs[:, :LANDMARK_OFFSET])   # own vel, pos
        np.testing.assert_array_equal(obs[:, BLOCK.stop:env_obs.shape[1]], env_obs[:, BLOCK.stop:])  # others
        mine = env_obs[:, BLOCK].reshape(-1, N, 2)[np.arange(len(goal)), goal]
        np.testing.assert_array_equal(obs[:, env_obs.shape[1]:], mine)      # the grounded goal: that landmark


def test_off_by_default_units_observe_the_env_observation_and_the_goal() -> None:
    assert load_scenario("spread").make_config().attend is False
    for obs, env_obs, goal in training_obs({}):
        mine = env_obs[:, BLOCK].reshape(-1, N, 2)[np.arange(len(goal)), goal]
        np.testing.assert_array_equal(obs, np.concatenate([env_obs, mine], axis=1))


def test_a_flat_team_cannot_attend() -> None:
    sc = load_scenario("spread")
    with pytest.raises(ScenarioError, match="attend=true needs goals"):
        sc.build_layers(sc.make_config({"attend": "true", "layers": "1"}))


def test_the_deployed_team_observes_what_training_does() -> None:
    """The same episode, acted by the same seeded policies through Team.act (hdppo.load's acting
    path) and through training's step: the units' observations agree at every step."""
    from hdppo.runtime.team import Team
    overrides = {"attend": "true"}
    train = training_obs(overrides, seed=4)
    sc = load_scenario("spread")
    cfg = sc.make_config(overrides)
    team = Team(sc, cfg, {})
    deployed: list = []
    team._actors = [recorder(team.hier, deployed)] * len(team.hier.info)
    env = sc.batched_env(cfg, 1, 4)
    env.reset(seed=4)
    for _ in range(50):
        acts = team.act({u: env.obs[0, i] for i, u in enumerate(env.units)})
        env.step(np.array([[acts[u] for u in env.units]]))
    assert len(deployed) == len(train) == 50
    for (obs, *_), (want, *_) in zip(deployed, train, strict=True):
        np.testing.assert_array_equal(obs, want)
        assert ((obs[:, BLOCK] != 0).sum(axis=1) <= 2).all()          # the deployed units attend too


def test_check_verifies_what_units_observe(monkeypatch) -> None:
    report = run_check("spread", {"attend": "true"}, episodes=1, api_cycles=20)
    line = next(x for x in report.lines if x.name == "observations keep what attend keeps")
    assert report.ok and "low keeps 1.00 of 6 entities" in line.detail
    # the same check FAILs when the observations leak what attend drops
    monkeypatch.setattr("hdppo.team.hierarchy.attended", lambda spec, features, ctx, scenario: features)
    report = run_check("spread", {"attend": "true"}, episodes=1, api_cycles=20)
    line = next(x for x in report.lines if x.name == "observations keep what attend keeps")
    assert not line.ok and "layer 'low' node" in line.detail and "attend drops it" in line.detail
