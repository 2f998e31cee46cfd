"""The native warehouse scenario: hand-placed rules, no overlap, orders, vectorised == per-copy, API, hierarchy.

Layout of the default 12x10 warehouse (# shelf, S station, digits: zone home cells):
    y0 ............      y5 .####..####.
    y1 .####..####.      y6 ..2.....3...
    y2 ..0.....1...      y7 .####..####.
    y3 .####..####.      y8 ............
    y4 ............      y9 ...S.....S..
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from hdppo.errors import ScenarioError
from hdppo.scenarios.warehouse import (
    SCENARIO,
    WarehouseConfig,
    WarehouseParallelEnv,
    greedy_low,
    low_intrinsic,
    make_batch,
    robot_goal_success,
    team_goal_features,
    unit_reward,
)
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import Decision, HierarchyEnv
from hdppo.team.scenario import LayerContext, load_scenario
from tests.helpers.batch import assert_copies_match

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def cfg_with(**kw) -> WarehouseConfig:
    return dataclasses.replace(WarehouseConfig(), **kw)


def placed(robots, orders=(), carrying=None, **kw):
    """A one-copy batch with no arrivals, started from hand-given cells."""
    env = make_batch(cfg_with(n_teams=1, team_size=len(robots), order_rate=0.0, **kw), 1, seed=0)
    env.place(0, robots, orders, carrying)
    return env


def cells(env) -> list[list[int]]:
    return env.positions()[0].tolist()


def act(env, *a) -> object:
    return env.step(np.array([a]))


# ---- movement and no overlap ------------------------------------------------------------------
def test_walls_and_shelves_cancel_moves():
    env = placed([(0, 0), (2, 2), (11, 9)])
    act(env, UP, UP, RIGHT)                      # off the grid, into a shelf, off the grid
    assert cells(env) == [[0, 0], [2, 2], [11, 9]]
    act(env, DOWN, LEFT, UP)
    assert cells(env) == [[0, 1], [1, 2], [11, 8]]


def test_two_robots_one_cell_lowest_index_wins():
    env = placed([(5, 4), (7, 4), (0, 0)])
    act(env, RIGHT, LEFT, STAY)                  # both target (6, 4)
    assert cells(env)[:2] == [[6, 4], [7, 4]]
    env = placed([(7, 4), (5, 4), (0, 0)])
    act(env, LEFT, RIGHT, STAY)
    assert cells(env)[:2] == [[6, 4], [5, 4]]


def test_no_swap_and_no_entering_a_staying_robot():
    env = placed([(5, 4), (6, 4), (0, 0)])
    act(env, RIGHT, LEFT, STAY)                  # swap attempt: both cancelled
    assert cells(env)[:2] == [[5, 4], [6, 4]]
    act(env, RIGHT, STAY, STAY)                  # into a robot that stays
    assert cells(env)[:2] == [[5, 4], [6, 4]]


def test_chains_of_moves():
    env = placed([(4, 4), (5, 4), (6, 4)])
    act(env, RIGHT, RIGHT, RIGHT)                # each enters the cell the next one leaves
    assert cells(env) == [[5, 4], [6, 4], [7, 4]]
    act(env, RIGHT, RIGHT, STAY)                 # the head stays: the whole chain is cancelled
    assert cells(env) == [[5, 4], [6, 4], [7, 4]]
    act(env, RIGHT, RIGHT, UP)                   # the head is blocked by a shelf: same
    assert cells(env) == [[5, 4], [6, 4], [7, 4]]
    env = placed([(5, 1), (6, 1), (6, 2), (5, 2)])
    act(env, RIGHT, DOWN, LEFT, UP)              # a rotation in a free 2x2 block goes through
    assert cells(env) == [[6, 1], [6, 2], [5, 2], [5, 1]]


def test_random_moves_never_overlap():
    env = make_batch(cfg_with(max_steps=50), 8, seed=3)
    rng = np.random.default_rng(0)
    for _ in range(150):
        out = env.step(rng.integers(5, size=(8, 8)))
        env.reset_done(out.done)
        c = env.cell
        assert all(len(set(row)) == len(row) for row in c.tolist())
        assert not env.layout.blocked[c].any()


# ---- orders: pick, deliver, arrivals, bookkeeping --------------------------------------------
def test_pick_and_deliver():
    env = placed([(2, 8), (0, 0)], orders=[(3, 7)], pick_reward=0.5)
    out = act(env, RIGHT, STAY)                  # (3, 8) is below the shelf (3, 7): pick
    assert out.rewards[0].tolist() == [0.5, 0.0]
    assert env.carrying[0].tolist() == [True, False] and env.last_pick[0].tolist() == [2, -1]
    assert (env.slot_shelf[0] < 0).all()
    out = act(env, DOWN, STAY)                   # (3, 9) is a station: deliver
    assert out.rewards[0].tolist() == [1.0, 0.0]
    assert env.carrying[0].tolist() == [False, False] and env.last_deliver[0].tolist() == [True, False]
    info = env.episode_info(0)
    assert info["deliveries"] == 1 and info["orders"] == 1 and info["delivery_rate"] == 1.0
    out = act(env, STAY, STAY)                   # nothing more to deliver
    assert out.rewards[0].tolist() == [0.0, 0.0] and env.deliveries[0] == 1


def test_pick_ties_and_carrying_robots():
    # robots 0 and 1 both next to the shelf (9, 5): the lower index picks; robot 2 carries and cannot
    env = placed([(9, 6), (9, 4), (2, 4)], orders=[(9, 5), (2, 3)], carrying=[False, False, True])
    out = act(env, STAY, STAY, STAY)
    assert env.carrying[0].tolist() == [True, False, True] and env.last_pick[0].tolist() == [3, -1, -1]
    assert out.rewards[0, 2] == 0.0 and (env.slot_shelf[0] >= 0).sum() == 1


def test_arrivals_are_seeded_and_capped():
    cfg = cfg_with(n_teams=1, team_size=2, order_rate=1.0, slots=1)
    a, b = make_batch(cfg, 2, seed=5), make_batch(cfg, 2, seed=5)
    for env in (a, b):
        env.place(0, [(0, 9), (1, 9)])           # no shelf next to the bottom row: nobody picks
        env.place(1, [(0, 9), (1, 9)])
    for step in range(1, 11):
        a.step(np.zeros((2, 2), np.int64))
        b.step(np.zeros((2, 2), np.int64))
        open_orders = (a.slot_shelf >= 0).sum(axis=1)
        assert (open_orders == min(step, 4)).all()     # one slot per zone: capped at 4
    np.testing.assert_array_equal(a.slot_shelf, b.slot_shelf)
    assert not np.array_equal(a.slot_shelf[0], a.slot_shelf[1])      # copies draw their own streams
    assert a.episode_info(0) == {"delivery_rate": 0.0, "deliveries": 0.0, "orders": 10.0, "rejected": 6.0}
    shelves = a.slot_shelf[0]
    assert sorted(a.layout.shelf_zone[shelves].tolist()) == [0, 1, 2, 3]
    quiet = make_batch(cfg_with(order_rate=0.0), 2, seed=0)
    for _ in range(20):
        quiet.step(np.zeros((2, 8), np.int64))
    assert (quiet.slot_shelf < 0).all() and (quiet.orders == 0).all()


def test_delivery_rate_counts_every_arrival():
    env = make_batch(cfg_with(max_steps=200), 4, seed=1)
    rng = np.random.default_rng(0)
    arrived = np.zeros(4)
    for _ in range(200):
        before = env.orders.copy()
        out = env.step(rng.integers(5, size=(4, 8)))
        arrived += env.orders - before
        assert out.rewards.sum(axis=1).tolist() == pytest.approx(
            (env.last_deliver.sum(axis=1) + 0.5 * (env.last_pick >= 0).sum(axis=1)).tolist())
    assert out.done.all() and out.truncated.all()
    for e in range(4):
        info = env.episode_info(e)
        assert info["orders"] == arrived[e] > 80             # ~0.6 * 200 arrivals
        assert info["delivery_rate"] == info["deliveries"] / info["orders"]


# ---- vectorised == per copy; PettingZoo API ---------------------------------------------------
def test_batch_equals_independent_copies():
    cfg = cfg_with(max_steps=30)
    # 100 steps: 3 episodes per copy, and a refill of the pre-drawn random blocks
    n_done = assert_copies_match(lambda n, seed: make_batch(cfg, n, seed), 4, 100,
                                 lambda big, rng: rng.integers(5, size=(4, 8)))
    assert n_done >= 12


def test_parallel_api():
    env = WarehouseParallelEnv(cfg_with(max_steps=40))
    parallel_api_test(env, num_cycles=100)
    parallel_seed_test(lambda: WarehouseParallelEnv(cfg_with(max_steps=40)), num_cycles=100)
    obs, _ = env.reset(seed=0)
    assert env.state().shape == env.state_space.shape
    assert all(env.observation_space(a).contains(o) for a, o in obs.items())


# ---- config, layers, goals --------------------------------------------------------------------
@pytest.mark.parametrize("bad,text", [({"layers": "4"}, "layers=1, 2 or 3"), ({"width": "4"}, "width, height >= 6"),
                                      ({"order_rate": "1.5"}, "probability"),
                                      ({"n_teams": "20", "team_size": "8"}, "do not fit")])
def test_bad_config_is_explained(bad, text):
    sc = load_scenario("warehouse")
    with pytest.raises(ScenarioError) as err:
        sc.build_layers(sc.make_config(bad))
    assert text in err.value.message()


def test_layers_by_depth():
    sc = load_scenario("warehouse")
    for depth, names in ((1, ["low"]), (2, ["high", "low"]), (3, ["high", "mid", "low"])):
        specs = sc.build_layers(sc.make_config({"layers": str(depth)}))
        assert [s.name for s in specs] == names
    specs = sc.build_layers(sc.make_config())
    assert [s.interval for s in specs] == [8, 4, 1] and specs[-1].w_int == 0.1 and specs[-1].scripted is greedy_low


def test_goal_grounding():
    env = placed([(0, 0), (11, 0), (3, 9)], orders=[(9, 7)], carrying=[False, False, True])
    gf = env.goal_features(np.array([[3, 0, 1]]))
    # robot 0, zone 3: the order at (9, 7), 15 steps to its pick spot (9, 6), first move down
    np.testing.assert_allclose(gf[0, 0], [9 / 11, 7 / 11, 15 / 20, 0, 1, 1], rtol=1e-6)
    # robot 1, zone 0 has no order: the zone's home cell (2, 2), no task
    np.testing.assert_allclose(gf[0, 1, [0, 1, 5]], [-9 / 11, 2 / 11, 0], rtol=1e-6)
    # robot 2 carries: its nearest station (it stands on it)
    np.testing.assert_allclose(gf[0, 2], [0, 0, 0, 0, 0, 1])
    teams = np.concatenate([env.obs.mean(axis=1, keepdims=True), env.obs.max(axis=1, keepdims=True)], axis=2)
    tg = team_goal_features(np.array([[3]]), LayerContext(teams, np.ones((1, 1), bool), np.array([[3]])))
    hx, hy = 8, 6                                   # zone 3's home cell
    np.testing.assert_allclose(tg[0, 0], [(hx - 14 / 3) / 11, (hy - 3) / 11, 1 / 4], rtol=1e-5)


def test_two_robots_same_zone_take_different_orders():
    env = placed([(2, 4), (3, 4)], orders=[(1, 3), (4, 3)])
    gf = env.goal_features(np.array([[0, 0]]))
    # robot 0 is nearest to (1, 3), robot 1 to (4, 3): each takes its own
    np.testing.assert_allclose(gf[0, :, 0] * 11, [-1, 1], atol=1e-5)


def test_scripted_robot_fetches_and_delivers():
    env = placed([(0, 0), (11, 0)], orders=[(9, 7)])
    goals = np.array([[3, 0]])
    events = []
    for t in range(60):
        obs = np.concatenate([env.obs, env.goal_features(goals)], axis=2)
        a = greedy_low(Decision(2, obs, env.alive.copy(), None, env.t.copy()))
        pre = env.alive.copy()
        env.step(a)
        ctx = LayerContext(env.obs, pre, goals, env.goal_features(goals), env.t, env)
        if robot_goal_success(ctx)[0, 0]:
            events.append(("pick", t))
            assert low_intrinsic(ctx)[0, 0] == 1.0
        if env.last_deliver[0, 0]:
            events.append(("deliver", t))
    assert [e for e, _ in events] == ["pick", "deliver"]
    assert events[0][1] == 14 and env.deliveries[0] == 1      # the shortest path: 15 steps to the pick spot
    assert cells(env)[1] == [2, 2]                             # robot 1 waits at zone 0's home


def test_off_goal_pick_takes_back_what_the_delivery_of_that_item_pays():
    """A robot with goal zone 3 picks a zone-2 item, then delivers it; one with goal zone 2 the same."""
    def rewards(goal: int, off_goal_pick: float) -> list[float]:
        env = placed([(2, 8), (0, 0)], orders=[(3, 7)])            # the shelf (3, 7) is in zone 2
        goals, hook, out = np.array([[goal, 0]]), unit_reward(off_goal_pick), []
        for a in (RIGHT, DOWN):                                      # pick below the shelf, deliver on (3, 9)
            pre = env.alive.copy()
            act(env, a, STAY)
            out.append(float(hook(LayerContext(env.obs, pre, goals, env.goal_features(goals), env.t, env))[0, 0]))
        return out
    assert unit_reward(0.0) is low_intrinsic                        # the default: every delivery pays
    assert rewards(2, 0.0) == rewards(2, -1.0) == [1.0, 1.0]         # an order of the goal zone: +1, +1
    assert rewards(3, -1.0) == [-1.0, 1.0]                           # another zone's item nets 0
    off = rewards(3, 0.0)                                            # before: the pick is shaped, the delivery +1
    assert off[1] == 1.0 and -0.1 <= off[0] <= 0.0
    assert sum(rewards(3, -1.0)) < sum(off) < sum(rewards(2, -1.0))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_hierarchy_random_runs(depth):
    env = HierarchyEnv(SCENARIO, cfg_with(layers=depth, max_steps=40), n_envs=2, seed=0)
    pol = [uniform_policy(info, seed=i) for i, info in enumerate(env.info)]
    if depth > 1:
        pol[-1] = greedy_low
    episodes = []
    for _ in range(80):
        episodes += env.step(lambda d: pol[d.layer](d)).episodes
    assert len(episodes) == 4 and all(0.0 <= ep["delivery_rate"] <= 1.0 for ep in episodes)
    if depth > 1:
        assert sum(ep["deliveries"] for ep in episodes) > 0
