"""The shared-reward switch (`shared_reward.LAYER=true`, or `Layer(shared_reward=True)`): every node of
that layer receives its copy's total env reward over all units (alive before the step) instead of
the sum over its own units; other layers, the team return and dead units' zero are unchanged."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Layer
from tests.helpers.scripted_env import make_scenario, reward_of

UNITS = 4


def zeros(d):
    return np.zeros(d.mask.shape, dtype=np.int64)


def low_rewards(overrides: dict, steps: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The units' rewards per step (low decides every step, so each closed transition is one step's
    reward) and which slots closed, in copy 0."""
    scenario, cfg = make_scenario(**overrides)
    hier = HierarchyEnv(scenario, cfg, n_envs=2, seed=0)
    rewards, closed = [], []
    for _ in range(steps):
        res = hier.step(zeros)
        rewards.append(res.layers[-1].reward[0].copy())
        closed.append(res.layers[-1].closed[0].copy())
    return rewards, closed


def test_units_of_a_shared_layer_receive_the_teams_total_env_reward():
    own, _ = low_rewards({}, 3)
    shared, closed = low_rewards({"shared_reward": {"low": True}}, 3)
    for t in range(3):
        np.testing.assert_allclose(own[t], [reward_of(t, i) for i in range(UNITS)])
        total = sum(reward_of(t, i) for i in range(UNITS))
        assert closed[t].all()
        np.testing.assert_allclose(shared[t], [total] * UNITS)


def test_a_dead_unit_gets_nothing_and_adds_nothing_to_the_total():
    shared, closed = low_rewards({"shared_reward": {"low": True}, "deaths": {"1": 1}}, 4)
    np.testing.assert_allclose(shared[1], [sum(reward_of(1, i) for i in range(UNITS))] * UNITS)  # its last step
    for t in (2, 3):
        alive = [0, 2, 3]
        assert list(np.flatnonzero(closed[t])) == alive
        np.testing.assert_allclose(shared[t][alive], [sum(reward_of(t, i) for i in alive)] * 3)


def test_an_upper_layer_shares_too_and_the_episode_record_shows_it():
    scenario, cfg = make_scenario(shared_reward={"mid": True}, max_steps=5)
    hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
    hier.detailed_stats = True
    eps: list[dict] = []
    while not eps:
        eps = hier.step(zeros).episodes
    ep = eps[0]
    team = sum(reward_of(t, i) for t in range(5) for i in range(UNITS))
    assert ep["team_return"] == pytest.approx(team)
    np.testing.assert_allclose(ep["node_returns"]["mid"], [team, team])               # not each squad's own
    np.testing.assert_allclose(ep["node_returns"]["low"], ep["unit_env_returns"])    # low not shared
    np.testing.assert_allclose(ep["node_returns"]["high"], [team])


def test_the_layer_field_and_the_config_map_agree_and_the_map_wins():
    base, cfg = make_scenario()
    layers = base.layers(cfg)
    layers[-1] = Layer("low", shared_reward=True)
    scenario = dataclasses.replace(base, layers=lambda c: layers)
    assert scenario.build_layers(cfg)[-1].shared_reward is True
    assert scenario.build_layers(scenario.make_config({"shared_reward.low": "false"}))[-1].shared_reward is False
    assert base.build_layers(base.make_config({"shared_reward.low": "true"}))[-1].shared_reward is True
    assert not any(spec.shared_reward for spec in base.build_layers(cfg))          # off by default


def test_a_map_naming_an_unknown_layer_is_refused():
    scenario, _ = make_scenario()
    with pytest.raises(ScenarioError, match="config shared_reward names unknown layer 'units'"):
        scenario.build_layers(scenario.make_config({"shared_reward.units": "true"}))



def test_check_passes_with_a_shared_layer() -> None:
    """check's conformance compares each node with its own units, so it runs with the switch off."""
    from hdppo.team.check import run_check
    report = run_check("grid", {"shared_reward.low": "true"}, episodes=2, n_envs=2)
    assert report.ok, [(line.name, line.detail) for line in report.lines if not line.ok]
