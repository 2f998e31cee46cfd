"""The native grid scenario: PettingZoo conformance, vectorised == per-copy, hand-made rules, hierarchy."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from hdppo.scenarios.grid import (
    SCENARIO,
    GridBatch,
    GridConfig,
    GridParallelEnv,
    greedy_low,
    low_intrinsic,
    unit_goal_features,
    unit_goal_success,
)
from hdppo.sims.pettingzoo import PettingZooBatch
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import Decision, HierarchyEnv
from hdppo.team.scenario import LayerContext, load_scenario
from tests.helpers.batch import assert_copies_match

PENALTY = GridConfig().step_penalty


def cfg_with(**kw) -> GridConfig:
    return dataclasses.replace(GridConfig(), **kw)


# ---- PettingZoo API --------------------------------------------------------------------------
@pytest.mark.parametrize("hazards", [0, 6])
def test_parallel_api(hazards):
    env = GridParallelEnv(cfg_with(hazards=hazards))
    parallel_api_test(env, num_cycles=200)           # raises AssertionError on any API violation
    parallel_seed_test(lambda: GridParallelEnv(cfg_with(hazards=hazards)), num_cycles=200)
    obs, _ = env.reset(seed=0)
    assert set(obs) == set(env.possible_agents) and all(env.observation_space(a).contains(o) for a, o in obs.items())


def test_parallel_env_removes_dead_and_gives_state():
    env = GridParallelEnv(cfg_with(hazards=8))
    env.reset(seed=3)
    assert env.state().shape == env.state_space.shape
    seen_death, rng = False, np.random.default_rng(0)
    for _ in range(200):
        if not env.agents:
            env.reset()
        before = list(env.agents)
        obs, rew, term, trunc, _ = env.step({a: int(rng.integers(5)) for a in env.agents})
        assert set(obs) == set(before)
        gone = [a for a in before if term[a] or trunc[a]]
        assert not set(gone) & set(env.agents)
        seen_death |= any(term[a] for a in gone) and bool(env.agents)
        for a in env.agents:
            assert env.observation_space(a).contains(obs[a])
    assert seen_death


# ---- vectorised == independent copies --------------------------------------------------------
@pytest.mark.parametrize("hazards", [0, 3])
def test_batch_equals_independent_copies(hazards):
    cfg = cfg_with(hazards=hazards, max_steps=12)
    n_done = assert_copies_match(lambda n, seed: GridBatch(cfg, n, seed), 5, 60,
                                 lambda big, rng: rng.integers(5, size=(5, cfg.n_units)))
    assert n_done >= 5  # several episodes with auto-resets


def test_pettingzoo_adapter_matches_native():
    """PettingZooBatch over GridParallelEnv copies steps exactly like GridBatch (same seeds, resets)."""
    cfg, E = cfg_with(hazards=3, max_steps=10), 3
    native = GridBatch(cfg, E, seed=2)
    adapted = PettingZooBatch(lambda: GridParallelEnv(cfg), native.units, E)
    native.reset(seed=2)
    adapted.reset(seed=2)
    rng = np.random.default_rng(1)
    for _ in range(40):
        actions = rng.integers(5, size=(E, cfg.n_units))
        a, b = native.step(actions), adapted.step(actions)
        for field in ("rewards", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(native.obs, adapted.obs)
        np.testing.assert_array_equal(native.state(), adapted.state())
        native.reset_done(a.done)
        adapted.reset_done(b.done)


# ---- hand-made cases -------------------------------------------------------------------------
TARGETS = [(3, 3), (0, 6), (6, 0), (6, 6)]


def test_claim_reward_and_flag():
    env = GridBatch(cfg_with(), 1, seed=0)
    env.place(0, units=[(2, 3), (0, 0), (1, 0), (5, 5)], targets=TARGETS)
    out = env.step(np.array([[4, 0, 0, 0]]))  # unit 0 moves right onto (3, 3)
    assert out.rewards[0, 0] == pytest.approx(1.0 - PENALTY)
    np.testing.assert_allclose(out.rewards[0, 1:], -PENALTY)
    assert env.claimed[0].tolist() == [True, False, False, False]
    assert env.last_claim[0].tolist() == [0, -1, -1, -1]
    assert env.obs[0, 0, 2:4].tolist() == [0.0, 0.0]
    assert env.obs[0, 1, 2 + 2 * 4] == 1.0  # everyone sees the claimed flag
    out = env.step(np.array([[0, 0, 0, 0]]))  # staying on a claimed target gives nothing more
    np.testing.assert_allclose(out.rewards[0], -PENALTY)
    assert not out.done[0]


def test_tie_goes_to_lowest_index():
    env = GridBatch(cfg_with(), 1, seed=0)
    env.place(0, units=[(5, 5), (2, 3), (4, 3), (3, 2)], targets=TARGETS)
    out = env.step(np.array([[0, 4, 3, 2]]))  # units 1, 2, 3 step onto (3, 3) together
    assert out.rewards[0].tolist() == pytest.approx([-PENALTY, 1 - PENALTY, -PENALTY, -PENALTY])
    assert env.claimed[0, 0]


def test_walls_clip():
    env = GridBatch(cfg_with(), 1, seed=0)
    env.place(0, units=[(0, 0), (6, 5), (0, 5), (6, 1)], targets=TARGETS)
    env.step(np.array([[1, 4, 3, 4]]))
    assert env.positions()[0].tolist() == [[0, 0], [6, 5], [0, 5], [6, 1]]
    env.step(np.array([[2, 1, 4, 3]]))
    assert env.positions()[0].tolist() == [[0, 1], [6, 4], [1, 5], [5, 1]]


def test_hazard_kills():
    env = GridBatch(cfg_with(hazards=1), 1, seed=0)
    env.place(0, units=[(1, 1), (4, 4), (5, 4), (4, 5)], targets=TARGETS, hazards=[(1, 2)])
    old_obs = env.obs[0, 0].copy()
    out = env.step(np.array([[2, 0, 0, 0]]))  # unit 0 steps down onto the hazard
    assert out.terminated[0].tolist() == [True, False, False, False]
    assert not out.truncated[0].any() and not out.done[0]
    assert out.rewards[0, 0] == pytest.approx(-PENALTY)  # the step's reward still counts
    assert env.alive[0].tolist() == [False, True, True, True]
    died_obs = env.obs[0, 0].copy()
    assert not np.array_equal(died_obs, old_obs)
    for _ in range(3):
        out = env.step(np.array([[4, 0, 0, 0]]))
        assert out.rewards[0, 0] == 0.0 and not out.terminated[0, 0] and not out.truncated[0, 0]
        np.testing.assert_array_equal(env.obs[0, 0], died_obs)  # a dead unit keeps its last observation
    assert env.positions()[0, 0].tolist() == [1, 2]


def test_all_dead_ends_episode():
    env = GridBatch(cfg_with(n_units=2, squad_size=1, hazards=2), 1, seed=0)
    env.place(0, units=[(1, 1), (5, 5)], targets=TARGETS, hazards=[(1, 2), (5, 4)])
    out = env.step(np.array([[2, 1]]))
    assert out.terminated[0].all() and out.done[0]
    assert env.episode_info(0) == {"targets_claimed": 0.0, "success": 0.0}


def test_all_claimed_terminates_and_truncation():
    env = GridBatch(cfg_with(n_targets=1, max_steps=5), 1, seed=0)
    env.place(0, units=[(2, 3), (0, 0), (1, 0), (5, 5)], targets=[(3, 3)])
    out = env.step(np.array([[4, 0, 0, 0]]))
    assert out.terminated[0].all() and out.done[0] and not out.truncated[0].any()
    assert env.episode_info(0) == {"targets_claimed": 1.0, "success": 1.0}

    env.place(0, units=[(0, 0), (0, 1), (0, 2), (0, 3)], targets=[(6, 6)])
    for t in range(5):
        out = env.step(np.zeros((1, 4), np.int64))
        assert out.done[0] == (t == 4)
    assert out.truncated[0].all() and not out.terminated[0].any()
    assert not env.alive[0].any() and env.obs[0, 0, -1] == 1.0
    out = env.step(np.zeros((1, 4), np.int64))
    assert (out.rewards == 0).all() and out.done[0]


# ---- determinism -----------------------------------------------------------------------------
def _rollout(seed: int, steps: int = 80) -> list[np.ndarray]:
    env = GridBatch(cfg_with(hazards=2), 3, seed=seed)
    rng = np.random.default_rng(5)
    trace = [env.obs.copy()]
    for _ in range(steps):
        out = env.step(rng.integers(5, size=(3, 4)))
        env.reset_done(out.done)
        trace += [env.obs.copy(), out.rewards]
    return trace


def test_determinism():
    a, b = _rollout(4), _rollout(4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    e1, e2 = GridBatch(GridConfig(), 4, seed=4), GridBatch(GridConfig(), 4, seed=5)
    assert not (np.array_equal(e1.tx, e2.tx) and np.array_equal(e1.ty, e2.ty))
    e1.reset(seed=5)
    np.testing.assert_array_equal(e1.obs, e2.obs)


# ---- hierarchy -------------------------------------------------------------------------------
def test_loads_by_name_and_overrides():
    sc = load_scenario("grid")
    cfg = sc.make_config({"layers": "2", "w_int.low": "0.5", "hazards": "1"})
    specs = sc.build_layers(cfg)
    assert [s.name for s in specs] == ["high", "low"] and specs[-1].w_int == 0.5
    assert [s.name for s in sc.build_layers(sc.make_config())] == ["high", "mid", "low"]
    assert [s.interval for s in sc.build_layers(sc.make_config())] == [8, 4, 1]


def _policies(env: HierarchyEnv, seed: int = 0) -> list:
    return [uniform_policy(info, seed=seed + i) for i, info in enumerate(env.info)]


@pytest.mark.parametrize("depth,hazards", [(1, 0), (2, 0), (3, 0), (3, 4)])
def test_hierarchy_random_runs(depth, hazards):
    cfg = cfg_with(layers=depth, hazards=hazards)
    env = HierarchyEnv(SCENARIO, cfg, n_envs=4, seed=0)
    pol = _policies(env)
    episodes = []
    for _ in range(200):
        res = env.step(lambda d: pol[d.layer](d))
        episodes += res.episodes
    assert episodes and all(0.0 <= ep["targets_claimed"] <= 1.0 for ep in episodes)
    stats = env.pop_goal_stats()
    assert set(stats) == {s.name for s in env.specs[1:]}


def _low_goal_success(scripted: bool, steps: int = 300) -> float:
    env = HierarchyEnv(SCENARIO, GridConfig(), n_envs=8, seed=1)
    pol = _policies(env)
    if scripted:
        pol[-1] = greedy_low
    for _ in range(steps):
        env.step(lambda d: pol[d.layer](d))
    return env.pop_goal_stats()["low"]


def test_greedy_low_beats_random():
    # measured (seeds 0-3): greedy 0.82-0.83, random 0.41-0.44; random is not near 0 because a goal
    # also counts as reached when another unit claims the goal target
    greedy, rand = _low_goal_success(True), _low_goal_success(False)
    assert greedy > 0.7, greedy
    assert rand < 0.55, rand
    assert greedy - rand > 0.3


def test_greedy_low_and_intrinsic():
    env = GridBatch(cfg_with(), 1, seed=0)
    env.place(0, units=[(2, 3), (0, 0), (6, 5), (5, 5)], targets=TARGETS)
    goals = np.array([[0, 0, 3, 1]])
    feats = unit_goal_features(4)(goals, LayerContext(env.obs, env.alive, goals))
    np.testing.assert_allclose(feats[0], [[1 / 6, 0, 0], [0.5, 0.5, 0], [0, 1 / 6, 0], [-5 / 6, 1 / 6, 0]], rtol=1e-6)
    act = greedy_low(Decision(2, np.concatenate([env.obs, feats], axis=2), env.alive.copy()))
    assert act.tolist() == [[4, 4, 2, 3]]  # x first, then y
    pre_alive = env.alive.copy()
    env.step(act)
    feats = unit_goal_features(4)(goals, LayerContext(env.obs, env.alive, goals))
    ctx = LayerContext(env.obs, pre_alive, goals, feats, env.t, env)
    r = low_intrinsic(ctx)
    # units 0 and 2 claimed their goals; unit 1's goal (target 0) is claimed by unit 0; unit 3 shapes
    np.testing.assert_allclose(r[0], [1.0, 0.0, 1.0, -0.1 * (4 / 6 + 1 / 6) / 2], rtol=1e-6)
    assert unit_goal_success(ctx)[0].tolist() == [True, True, True, False]
    assert (greedy_low(Decision(2, np.concatenate([env.obs, feats], axis=2), env.alive.copy()))[0, :2] == 0).all()


def test_many_copies_step():
    cfg = GridConfig()
    env = GridBatch(cfg, 16, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(500):
        out = env.step(rng.integers(5, size=(16, cfg.n_units)))
        env.reset_done(out.done)
    assert env.obs.shape == (16, 4, 3 + 3 * cfg.n_targets)
