"""Orders to a loaded team: `team.act(obs, goals={node: goal})` and `hdppo.load(run, scripted=...)`."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import hdppo
from hdppo.errors import ConfigError
from hdppo.runtime.orders import check_goal
from hdppo.scenarios.grid import GridBatch, GridConfig, _ground
from tests.helpers.runtime import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("orders") / "run", "grid")


def play(team, steps: int, orders=lambda t: None, seed: int = 5):
    """`steps` steps of one grid episode; per step the units' decision obs, the goals held, the actions."""
    env = GridBatch(GridConfig(), 1, seed)
    seen: list = []
    low = team._actors[-1]
    team._actors[-1] = lambda d: (seen.append(d.obs[0].copy()), low(d))[1]
    team.reset()
    out = []
    for t in range(steps):
        obs = {u: env.obs[0, i] for i, u in enumerate(env.units) if env.alive[0, i]}
        acts = team.act(obs, goals=orders(t))
        out.append((env.obs[0].copy(), seen[-1], team.goals(), acts))
        env.step(np.array([[acts.get(u, 0) for u in env.units]]))
    return out


def test_ordered_units_observe_the_grounding_of_their_goal_at_every_step(run):
    team = hdppo.load(run, deterministic=True)
    for env_obs, unit_obs, goals, _ in play(team, 12, lambda t: {"unit_0": 2, "unit_3": 1}):
        assert goals["low"]["unit_0"] == 2 and goals["low"]["unit_3"] == 1     # also where mid decides (t % 4 == 0)
        want = _ground(env_obs[None], np.array([[2, 0, 0, 1]]), 4)[0]
        np.testing.assert_array_equal(unit_obs[0, -3:], want[0])
        np.testing.assert_array_equal(unit_obs[3, -3:], want[3])


def test_an_order_to_a_squad_holds_over_the_commander(run):
    team = hdppo.load(run, deterministic=True)
    for _, _, goals, _ in play(team, 10, lambda t: {"mid_1": 3}):
        assert goals["mid"]["mid_1"] == 3


def test_without_orders_the_parent_takes_over_at_its_next_decision(run):
    squads = {"mid": lambda d: np.zeros(d.mask.shape, np.int64)}      # every unit's goal: target 0
    team = hdppo.load(run, deterministic=True, scripted=squads)
    held = [g["low"]["unit_0"] for _, _, g, _ in play(team, 9, lambda t: {"unit_0": 3} if t == 1 else None)]
    assert held == [0, 3, 3, 3, 0, 0, 0, 0, 0]       # held until mid decides again at t=4


def test_no_orders_and_empty_orders_act_alike(run):
    plain = play(hdppo.load(run, seed=1), 10)
    empty = play(hdppo.load(run, seed=1), 10, lambda t: {})
    assert [a for *_, a in plain] == [a for *_, a in empty]


@pytest.mark.parametrize(("goals", "words"), [
    ({"unit_0": 4}, ["goal 4 for node 'unit_0'", "Discrete(4)", "an int in 0..3"]),
    ({"unit_0": 1.5}, ["goal 1.5 for node 'unit_0'"]),
    ({"high_0": 1}, ["node 'high_0' receives no goals", "mid_0"]),
    ({"nobody": 1}, ["node 'nobody' receives no goals"]),
])
def test_bad_orders_are_refused_naming_node_value_and_space(run, goals, words):
    team = hdppo.load(run)
    env = GridBatch(GridConfig(), 1, 0)
    with pytest.raises(ConfigError) as err:
        team.act({u: env.obs[0, i] for i, u in enumerate(env.units)}, goals=goals)
    for word in words:
        assert word in err.value.message()


def test_box_goals_are_checked_for_shape_and_bounds():
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    np.testing.assert_array_equal(check_goal("mid_0", [0.5, -0.5], box), np.array([0.5, -0.5], np.float32))
    for bad in ([0.5], [2.0, 0.0]):
        with pytest.raises(ConfigError, match="not in its goal space Box"):
            check_goal("mid_0", bad, box)


def test_a_scripted_layer_replaces_the_run_s_policy(run):
    calls = []

    def commander(d):
        calls.append(d.layer)
        return np.full(d.mask.shape, 2, np.int64)

    team = hdppo.load(run, scripted={"high": commander})
    assert [layer.acting for layer in team.layers] == ["scripted", "checkpoint", "checkpoint"]
    for _, _, goals, _ in play(team, 3):
        assert set(goals["mid"].values()) == {2}
    assert calls == [0]                               # the commander decides every 8 steps
    with pytest.raises(ConfigError, match="scripted= names layer 'boss'"):
        hdppo.load(run, scripted={"boss": commander})


def test_an_ordered_unit_attends_to_the_ordered_landmark():
    """spread attend=true: a unit observes only its goal's landmark, so an order decides what it sees."""
    from hdppo.runtime.team import Team
    from hdppo.scenarios.spread import LANDMARK_OFFSET
    from hdppo.team.scenario import load_scenario
    sc = load_scenario("spread")
    cfg = sc.make_config({"attend": "true"})
    team = Team(sc, cfg, {})
    seen: list = []
    low = team._actors[-1]
    team._actors[-1] = lambda d: (seen.append(d.obs[0].copy()), low(d))[1]
    env = sc.batched_env(cfg, 1, 3)
    env.reset(seed=3)
    unit = team.units[0]
    for t in range(6):
        acts = team.act({u: env.obs[0, i] for i, u in enumerate(env.units)}, goals={unit: t % 6})
        landmarks = seen[-1][0, LANDMARK_OFFSET:LANDMARK_OFFSET + 12].reshape(6, 2)
        kept = env.obs[0, 0, LANDMARK_OFFSET:LANDMARK_OFFSET + 12].reshape(6, 2)
        np.testing.assert_array_equal(landmarks[t % 6], kept[t % 6])
        assert not np.delete(landmarks, t % 6, axis=0).any()
        env.step(np.array([[acts[u] for u in env.units]]))


def test_an_exports_layout_says_attend_filters_the_units_observation(tmp_path):
    """A host that rebuilds observations from the manifest must know that attend zeroes the
    entities a unit's goal does not keep; without attend the layout says nothing of it."""
    from hdppo.runtime.export import observation_layout
    for attend in ("true", "false"):
        run = make_run(tmp_path / attend, "spread", {"attend": attend})
        team = hdppo.load(run)
        env_part = observation_layout(team, team.hier.n_layers - 1)[0]
        assert env_part["part"] == "env_observation"
        assert ("filtered by attend" in env_part["how"]) == (attend == "true"), env_part
        if attend == "true":
            assert "Entities(offset=" in env_part["how"]
