"""skirmish's reward modes (`reward=dense|outcome|points_end`) on hand-built states, and the
skirmish_long preset: the defaults of `skirmish` are unchanged."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.scenarios.skirmish import SkirmishBatch, SkirmishConfig
from hdppo.scenarios.skirmish.sim import N_MOVES
from hdppo.team.scenario import load_scenario
from tests.scenarios.test_skirmish import POINTS, U, act, place

# every default of SkirmishConfig before the reward modes existed, and the new key's
DEFAULTS = {"layers": 3, "n_squads": 3, "squad_size": 4, "n_melee": 2, "n_points": 3, "size": 20.0,
            "point_radius": 3.0, "max_steps": 400, "difficulty": 0.4, "speed": 1.0, "melee_hp": 1.5,
            "melee_range": 1.5, "melee_damage": 0.25, "melee_cooldown": 2, "ranged_hp": 1.0, "ranged_range": 5.0,
            "ranged_damage": 0.2, "ranged_cooldown": 3, "w_damage": 4.0, "w_taken": 2.0, "w_kill": 2.0,
            "w_point": 0.01, "w_win": 4.0, "w_hit": 0.2, "reward": "dense", "commander": "per_child",
            "goal_sampler": "uniform", "unit_shaping": "distance", "gamma": 0.99, "w_ext": {}, "w_int": {},
            "interval": {}, "shared_reward": {}}


def batch(**kw) -> SkirmishBatch:
    return SkirmishBatch(dataclasses.replace(SkirmishConfig(), **kw), 1, seed=0)


def test_the_defaults_are_unchanged():
    assert dataclasses.asdict(SkirmishConfig()) == DEFAULTS
    assert dataclasses.asdict(load_scenario("skirmish").make_config()) == DEFAULTS


def test_dense_is_the_per_step_sum_of_the_weighted_terms():
    """The dense reward of a hit that kills, on a hand-built state (as before the modes existed)."""
    env = batch()
    cfg = env.cfg
    place(env, {2: (5, 5), 3: (5, 6)}, {0: (8, 5)}, enemy_hp={0: 0.3})
    out = env.step(act(env, u2=N_MOVES, u3=N_MOVES))
    team = cfg.w_damage * 0.3 / env.o_max_hp.sum() + cfg.w_kill / env.K
    assert out.rewards[0, 2] == pytest.approx(team + cfg.w_hit * cfg.ranged_damage, rel=1e-5)
    assert out.rewards[0, 0] == pytest.approx(team, rel=1e-5)


@pytest.mark.parametrize("mode", ["outcome", "points_end"])
def test_sparse_modes_pay_nothing_for_a_kill_before_the_end(mode):
    env = batch(reward=mode)
    place(env, {2: (5, 5), 3: (5, 6), 0: POINTS[0]}, {0: (8, 5)}, enemy_hp={0: 0.3})
    out = env.step(act(env, u2=N_MOVES, u3=N_MOVES))          # a kill, damage, a point held: dense pays all
    assert env.ohp[0, 0] <= 0 and env.owner[0, 0] == 1 and not out.done[0]
    assert (out.rewards == 0).all()
    dense = batch()
    place(dense, {2: (5, 5), 3: (5, 6), 0: POINTS[0]}, {0: (8, 5)}, enemy_hp={0: 0.3})
    assert (dense.step(act(dense, u2=N_MOVES, u3=N_MOVES)).rewards[0] > 0).all()


def test_outcome_pays_w_win_on_the_winning_step_to_the_living_units():
    env = batch(reward="outcome", w_win=3.0)
    place(env, {2: (5, 5)}, {0: (8, 5)}, hp={5: 0.0}, enemy_hp={k: 0.0 for k in range(1, U)} | {0: 0.1})
    out = env.step(act(env, u2=N_MOVES))
    assert out.done[0] and env.episode_info(0)["win"] == 1.0
    expect = np.full(U, 3.0, np.float32)
    expect[5] = 0.0                                             # dead before the step: paid nothing
    np.testing.assert_array_equal(out.rewards[0], expect)


def test_outcome_pays_nothing_for_a_loss_or_a_draw():
    env = batch(reward="outcome")
    place(env, {0: (5, 5)}, {0: (6, 5)}, hp={i: 0.0 for i in range(1, U)} | {0: 0.1}, react=1.0)
    out = env.step(act(env))
    assert out.done[0] and env.episode_info(0)["win"] == 0.0
    assert (out.rewards == 0).all()
    env = batch(reward="outcome", max_steps=2)                  # a draw at the time limit: 1 point each
    place(env, {0: POINTS[0]}, {0: POINTS[2]})
    rewards = [env.step(act(env)).rewards[0].copy() for _ in range(2)]
    assert env.t[0] == 2 and not env.alive[0].any() and env.episode_info(0)["win"] == 0.0
    assert all((r == 0).all() for r in rewards)


def test_outcome_is_zero_until_the_time_limit_then_the_win():
    env = batch(reward="outcome", max_steps=4)
    place(env, {0: POINTS[0], 1: POINTS[1]}, {0: POINTS[2]})    # we hold 2 points, they hold 1
    rewards = []
    for _ in range(4):
        out = env.step(act(env))
        rewards.append(out.rewards[0].copy())
    assert out.done[0] and env.episode_info(0)["win"] == 1.0
    assert all((r == 0).all() for r in rewards[:3])
    np.testing.assert_array_equal(rewards[3], np.full(U, env.cfg.w_win, np.float32))


@pytest.mark.parametrize("ours, theirs", [([0, 1], [2]), ([0], [1, 2]), ([], [0])])
def test_points_end_pays_the_share_of_points_held_on_the_last_step(ours, theirs):
    env = batch(reward="points_end", max_steps=3)
    place(env, {i: POINTS[p] for i, p in enumerate(ours)}, {k: POINTS[p] for k, p in enumerate(theirs)})
    rewards = [env.step(act(env)).rewards[0].copy() for _ in range(3)]
    assert env.t[0] == 3 and not env.alive[0].any()
    assert all((r == 0).all() for r in rewards[:2])
    np.testing.assert_allclose(rewards[2], np.full(U, env.cfg.w_win * len(ours) / 3), rtol=1e-6)


def test_points_end_pays_at_an_elimination_too():
    env = batch(reward="points_end")
    place(env, {2: (5, 5), 0: POINTS[1]}, {0: (8, 5)}, enemy_hp={k: 0.0 for k in range(1, U)} | {0: 0.1})
    out = env.step(act(env, u2=N_MOVES))
    assert out.done[0] and env.owner[0].tolist() == [0, 1, 0]
    np.testing.assert_allclose(out.rewards[0], np.full(U, env.cfg.w_win / 3), rtol=1e-6)


def test_an_unknown_reward_mode_is_refused_with_a_fix():
    with pytest.raises(ScenarioError, match="reward='sparse' is not a reward mode") as err:
        batch(reward="sparse")
    assert "dense, outcome, points_end" in str(err.value)


def test_skirmish_long_changes_only_its_documented_defaults():
    long = dataclasses.asdict(load_scenario("skirmish_long").make_config())
    changed = {k: v for k, v in long.items() if DEFAULTS[k] != v}
    assert changed == {"size": 40.0, "n_points": 5, "max_steps": 600, "difficulty": 0.85, "reward": "outcome"}
    back = load_scenario("skirmish_long").make_config({"reward": "dense", "size": 20})
    assert back.reward == "dense" and back.size == 20
