"""The battle scenario (MAgent2 battle_v4): squads by position, deaths, win bookkeeping, opponents, paths agree."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.scenarios.battle import SCENARIO
from hdppo.scenarios.battle.sim import (
    N_ACTIONS,
    STAY,
    BattleBatch,
    X,
    Y,
    make_parallel_env,
    random_controller,
    scripted_controller,
)
from hdppo.team.controllers import uniform_policy
from hdppo.team.episodes import members
from hdppo.team.graph import spatial_groups
from hdppo.team.hierarchy import HierarchyEnv

MAP = 24        # 16 v 16


def passive(obs, rng):
    return np.full(len(obs), STAY, np.int32)


def play(batch: BattleBatch, red, episodes: int) -> list[dict]:
    """Run red's array controller in every copy until `episodes` episodes have ended; their episode_info."""
    rng, out = np.random.default_rng(5), []
    while len(out) < episodes:
        res = batch.step(np.stack([red(batch.obs[e], rng) for e in range(batch.n_envs)]))
        for e in np.flatnonzero(res.done):
            info = batch.episode_info(e)
            red_left, blue_left = (batch.envs[e].env.get_num(h) for h in batch.envs[e].handles)
            assert info["survivors"] == red_left / batch.n_red and info["kills"] == 1 - blue_left / batch.n_blue
            out.append(info)
        batch.reset_done(res.done)
    return out[:episodes]


def test_squads_of_nine_formed_by_position_at_every_reset():
    sc = SCENARIO
    cfg = sc.make_config({"map_size": "30"})                  # 30 v 30: squads of 9, 9, 9, 3
    h = HierarchyEnv(sc, cfg, n_envs=2, seed=0)
    pol = [uniform_policy(inf, seed=i) for i, inf in enumerate(h.info)]
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(400):
        fresh = h.t == 0
        for e in np.flatnonzero(fresh):
            pos = h.env.obs[e][:, [X, Y]]
            squads = members(h, 1, e)
            assert sorted(len(s) for s in squads) == [3, 9, 9, 9]
            want = spatial_groups(pos, 9)
            assert all(len(set(want[s])) == 1 for s in squads)             # membership follows positions
            spread = np.mean([pos[s].std(axis=0).sum() for s in squads if len(s) == 9])
            rand = np.mean([pos[rng.permutation(len(pos))[:9]].std(axis=0).sum() for _ in range(50)])
            assert spread < 0.75 * rand                        # random squads of 9 are much wider
            checked += 1
        if checked >= 3:
            break
        h.step(lambda d: pol[d.layer](d))
    assert checked >= 3                                        # the first reset and at least one autoreset


def test_dead_units_never_act_and_squads_turn_inactive():
    sc = SCENARIO
    cfg = sc.make_config({"map_size": str(MAP), "opponent_eps": "0"})
    h = HierarchyEnv(sc, cfg, n_envs=2, seed=1)
    pol = [uniform_policy(inf, seed=i) for i, inf in enumerate(h.info)]
    deaths = 0
    for _ in range(60):
        alive = h.env.alive.copy()

        def act(d):
            if d.layer == 2:
                assert not (d.mask & ~alive).any(), "a dead unit was asked to act"
            if d.layer == 1:                                    # mid: one slot per (squad, member)
                idx, struct = h.idx[1], h.struct[1]
                members = idx.reshape(len(alive), -1)
                unit_alive = np.take_along_axis(alive, members, axis=1) & struct.reshape(len(alive), -1)
                assert not (d.mask & ~unit_alive).any(), "a squad decided for a dead unit"
            return pol[d.layer](d)
        h.step(act)
        deaths += int((alive & ~h.env.alive).sum())
        for e in range(2):                                      # a squad is active iff a member lives
            want = [h.env.alive[e, m].any() for m in members(h, 1, e)]
            np.testing.assert_array_equal(h.alive[1][e], want)
    assert deaths >= 8                                          # the scripted blue team kills random red units


def test_episode_info_on_forced_outcomes():
    # red passive vs a deterministic scripted blue: red is wiped out, blue loses no one
    lost = play(BattleBatch(MAP, 200, {}, 2, 0, scripted_controller(MAP, 0.0)), passive, 2)
    assert all(i["win"] == 0 and i["survivors"] == 0 and i["draw"] == 0 for i in lost)
    # scripted red vs a passive blue: red wipes blue out
    won = play(BattleBatch(MAP, 300, {}, 2, 0, passive), scripted_controller(MAP, 0.0), 2)
    assert all(i["win"] == 1 and i["kills"] == 1 and i["survivors"] > 0 for i in won)
    # both passive until the time limit: a tie, not a win
    tie = play(BattleBatch(MAP, 5, {}, 1, 0, passive), passive, 1)[0]
    assert tie == {"win": 0.0, "draw": 1.0, "survivors": 1.0, "kills": 0.0}


def test_scripted_opponent_beats_a_random_team():
    cfg = SCENARIO.make_config({"map_size": str(MAP)})
    batch = SCENARIO.batched_env(cfg, 4, 3)
    infos = play(batch, random_controller, 4)
    assert all(i["win"] == 0 and i["draw"] == 0 for i in infos)
    assert np.mean([i["kills"] for i in infos]) < 0.3


def test_native_batch_matches_pettingzoo_env():
    seed, blue = 7, scripted_controller(MAP, 0.0)
    batch = BattleBatch(MAP, 50, {}, 1, seed, blue)
    pz = make_parallel_env(MAP, 50, {})
    obs, _ = pz.reset(seed=seed)
    red = [f"red_{i}" for i in range(batch.n_red)]
    blues = [f"blue_{i}" for i in range(batch.n_blue)]
    rng = np.random.default_rng(0)
    deaths = 0
    for _ in range(50):
        live = set(pz.agents)
        np.testing.assert_array_equal(batch.alive[0], [a in live for a in red])
        for i, a in enumerate(red):
            if a in live:
                np.testing.assert_array_equal(batch.obs[0, i], obs[a])
        acts = rng.integers(N_ACTIONS, size=batch.n_red)
        theirs = [a for a in blues if a in live]
        blue_acts = blue(np.stack([obs[a] for a in theirs]), rng) if theirs else []
        obs, rew, term, trunc, _ = pz.step({**{a: int(acts[i]) for i, a in enumerate(red) if a in live},
                                            **{a: int(x) for a, x in zip(theirs, blue_acts)}})
        res = batch.step(acts[None])
        for i, a in enumerate(red):
            if a in live:
                assert res.rewards[0, i] == pytest.approx(rew[a])
                assert res.terminated[0, i] == term[a]
                np.testing.assert_array_equal(batch.obs[0, i], obs[a])
        deaths += int(res.terminated.sum())
        if res.done[0]:
            assert not pz.agents
            break
    assert deaths > 0


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_layers_build(layers):
    cfg = SCENARIO.make_config({"layers": str(layers)})
    h = HierarchyEnv(SCENARIO, cfg, n_envs=1, seed=0)
    assert [inf.name for inf in h.info] == {1: ["low"], 2: ["high", "low"], 3: ["high", "mid", "low"]}[layers]
    assert h.info[-1].obs_dim == 855 + (3 if layers > 1 else 0)


def test_bad_config_is_explained():
    with pytest.raises(ScenarioError, match="map_size"):
        SCENARIO.batched_env(SCENARIO.make_config({"map_size": "12"}), 1, 0)
    with pytest.raises(ScenarioError, match="rewards"):
        SCENARIO.batched_env(SCENARIO.make_config({"rewards.kill": "1"}), 1, 0)


# ---- the units' goal shaping (unit_shaping) ----------------------------------------------------
def _low_hook(shaping: str):
    cfg = SCENARIO.make_config({"unit_shaping": shaping})
    low = SCENARIO.build_layers(cfg)[-1]
    assert low.name == "low" and low.w_int == 0.1
    return low.intrinsic, float(cfg.map_size - 1)


def _goal(dx_cells: float, dy_cells: float, engage: bool, s: float) -> list[float]:
    """A unit's grounded goal: the vector to it / (map_size - 1), and the engage flag."""
    return [dx_cells / s, dy_cells / s, float(engage)]


def test_progress_shaping_pays_ground_closed_and_standing_on_the_goal_never_living_away():
    """unit_shaping=progress on one step of five units: 0.1 per 2-cell move closed beyond the goal's
    reach (reach 2 cells for a point, 1.5 for engage), minus that backing off, 0.05 on the goal, and
    0 for holding still away from it, where `distance` charges it every step (so dying ended a cost)."""
    from hdppo.team.scenario import LayerContext
    progress, s = _low_hook("progress")
    distance, _ = _low_hook("distance")
    before = [_goal(10, 0, False, s), _goal(10, 0, False, s), _goal(10, 0, False, s), _goal(3, 0, False, s),
              _goal(0, 6.5, True, s)]
    after = [_goal(8, 0, False, s),            # closed one full move (2 cells)
             _goal(10, 0, False, s),           # held still, 10 cells away
             _goal(11, 0, False, s),           # backed off 1 cell: half a move
             _goal(1, 0, False, s),            # stepped onto its point (within reach 2): 1 cell of the 2 closed
             _goal(0, 1.0, True, s)]           # engaged: 5 cells closed beyond reach 1.5, clipped to one move
    gf, pg = np.array([after], np.float32), np.array([before], np.float32)
    alive = np.ones((1, 5), bool)
    r = progress(LayerContext(None, alive, goal_features=gf, prev_goal_features=pg))[0]
    assert r == pytest.approx([0.1, 0.0, -0.05, 0.05 + 0.05, 0.05 + 0.1], abs=1e-6)
    old = distance(LayerContext(None, alive, goal_features=gf, prev_goal_features=pg))[0]
    assert old[1] == pytest.approx(-10 / s / np.sqrt(2), rel=1e-5)      # the cost progress does not charge
    first = progress(LayerContext(None, alive, goal_features=gf))[0]   # an episode's first step: no before
    assert first == pytest.approx([0, 0, 0, 0.05, 0.05])


def test_unknown_unit_shaping_is_refused_with_the_choices():
    refused = r"(?s)unit_shaping='potential' is not a unit shaping.*use one of distance, progress"
    with pytest.raises(ScenarioError, match=refused):
        SCENARIO.build_layers(SCENARIO.make_config({"unit_shaping": "potential"}))
