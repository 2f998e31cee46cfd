"""The native skirmish scenario: hand-placed mechanics, opponent AI, batched == single copies, API."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from hdppo.errors import ScenarioError
from hdppo.scenarios.skirmish import (
    SCENARIO,
    SkirmishBatch,
    SkirmishConfig,
    SkirmishParallelEnv,
    _ground,
    _Layout,
    scripted_low,
)
from hdppo.scenarios.skirmish.sim import DIRS, N_MOVES
from tests.helpers.batch import assert_copies_match

CFG = SkirmishConfig()
U = CFG.n_squads * CFG.squad_size
FAR_US, FAR_THEM = (0.0, 0.0), (20.0, 20.0)      # corners far from each other and from every point
POINTS = [(10.0, 20 / 6), (10.0, 10.0), (10.0, 100 / 6)]


def cfg_with(**kw) -> SkirmishConfig:
    return dataclasses.replace(SkirmishConfig(), **kw)


def place(env: SkirmishBatch, units: dict, enemies: dict, hp: dict | None = None, enemy_hp: dict | None = None,
          react: float = 0.0) -> None:
    """Copy 0 with the given units / enemies (index -> (x, y)); the rest sit in far corners.

    hp / enemy_hp map index -> hp (0 = dead); react is the opponents' chance to act (0: they idle)."""
    us = [units.get(i, FAR_US) for i in range(env.U)]
    them = [enemies.get(k, FAR_THEM) for k in range(env.K)]
    h = env.max_hp.copy()
    oh = env.o_max_hp.copy()
    for i, v in (hp or {}).items():
        h[i] = v
    for k, v in (enemy_hp or {}).items():
        oh[k] = v
    env.react = react
    env.place(0, us, them, hp=h, enemy_hp=oh)


def act(env: SkirmishBatch, **given) -> np.ndarray:
    """Actions [1, U]: stop for everyone except given unit indices (u3=9 -> unit 3 takes action 9)."""
    a = np.zeros((1, env.U), np.int64)
    for k, v in given.items():
        a[0, int(k[1:])] = v
    return a


# ---- mechanics on hand-placed states -----------------------------------------------------------
def test_attack_range_and_cooldown():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    place(env, {0: (5, 5), 2: (5, 8)}, {0: (6, 5), 1: (5, 8.0 + 5.5)})
    m = env.action_mask[0]
    assert m[0, N_MOVES + 0] and not m[0, N_MOVES + 1]           # melee range 1.5: enemy 0 at 1, enemy 1 at 8.6
    assert not m[2, N_MOVES + 1]                                  # ranged range 5: enemy 1 at 5.5
    assert m[2, N_MOVES + 0]                                      # enemy 0 at 3.2
    hp0 = env.ohp[0, 0]
    env.step(act(env, u0=N_MOVES + 0))
    assert env.ohp[0, 0] == pytest.approx(hp0 - CFG.melee_damage)
    for _ in range(CFG.melee_cooldown):                           # cooling down: attacks masked, and ignored
        assert not env.action_mask[0, 0, N_MOVES:].any() and env.action_mask[0, 0, :N_MOVES].all()
        env.step(act(env, u0=N_MOVES + 0))
        assert env.ohp[0, 0] == pytest.approx(hp0 - CFG.melee_damage)
    assert env.action_mask[0, 0, N_MOVES + 0]
    env.step(act(env, u0=N_MOVES + 0))
    assert env.ohp[0, 0] == pytest.approx(hp0 - 2 * CFG.melee_damage)


def test_damage_kill_and_rewards():
    cfg = cfg_with()
    env = SkirmishBatch(cfg, 1, seed=0)
    place(env, {2: (5, 5), 3: (5, 6)}, {0: (8, 5)}, enemy_hp={0: 0.3})
    out = env.step(act(env, u2=N_MOVES, u3=N_MOVES))              # two ranged hits of 0.2 kill it
    assert env.ohp[0, 0] <= 0 and not env.action_mask[0, :, N_MOVES].any()
    assert (env.obs[0, :, env.o_enemy:env.o_enemy + 4] == 0).all()   # a dead enemy shows as zeros
    team = cfg.w_damage * 0.3 / env.o_max_hp.sum() + cfg.w_kill / env.K
    assert out.rewards[0, 2] == pytest.approx(team + cfg.w_hit * cfg.ranged_damage, rel=1e-5)
    assert out.rewards[0, 0] == pytest.approx(team, rel=1e-5)
    assert not out.done[0]


def test_dead_units_cannot_act_and_are_masked():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    place(env, {0: (5, 5)}, {0: (6, 5)}, hp={0: 0.0})
    assert not env.alive[0, 0] and env.action_mask[0, 0].tolist() == [True] + [False] * (env.n_actions - 1)
    before, hp_enemy = env.pos[0, 0].copy(), env.ohp[0, 0]
    out = env.step(act(env, u0=N_MOVES + 0))
    env.step(act(env, u0=3))
    assert env.ohp[0, 0] == hp_enemy and (env.pos[0, 0] == before).all()
    assert out.rewards[0, 0] == 0 and not out.terminated[0, 0]


def test_unit_dies_and_is_terminated():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    place(env, {0: (5, 5)}, {0: (6, 5)}, hp={0: 0.1}, react=1.0)   # the enemy melee hits unit 0 at once
    out = env.step(act(env))
    assert out.terminated[0].tolist() == [True] + [False] * (U - 1)
    assert not env.alive[0, 0] and not out.done[0]


def test_moves_in_8_directions_clipped_to_arena():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    for a in range(1, N_MOVES):
        place(env, {0: (10, 10), 1: (0, 0), 2: (20, 20)}, {})
        env.step(act(env, u0=a, u1=a, u2=a))
        np.testing.assert_allclose(env.pos[0, 0], np.array([10, 10]) + DIRS[a] * CFG.speed)
        np.testing.assert_allclose(env.pos[0, 1], np.clip(DIRS[a] * CFG.speed, 0, 20))
        np.testing.assert_allclose(env.pos[0, 2], np.clip(20 + DIRS[a] * CFG.speed, 0, 20))
    assert len({tuple(np.round(d, 3)) for d in DIRS[1:]}) == 8


def test_point_holding_rule():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    # point 0: only us; point 1: both; point 2: only them (+ a dead unit of ours, which does not count)
    place(env, {0: POINTS[0], 1: POINTS[1], 4: (10, 100 / 6 + 1)}, {0: (10, 11), 1: (11, 100 / 6)}, hp={4: 0.0})
    assert env.owner[0].tolist() == [1, 0, -1]
    assert env.obs[0, 3, env.o_point + 2::3].tolist() == [1, 0, -1]     # every unit sees the owners
    place(env, {0: (10, 20 / 6 + 2.9)}, {})                              # inside the radius 3
    assert env.owner[0].tolist() == [1, 0, 0]
    place(env, {0: (10, 20 / 6 + 3.1)}, {})
    assert env.owner[0].tolist() == [0, 0, 0]


def test_win_by_elimination():
    cfg = cfg_with()
    env = SkirmishBatch(cfg, 1, seed=0)
    place(env, {2: (5, 5)}, {0: (8, 5)}, enemy_hp={k: 0.0 for k in range(1, U)} | {0: 0.1})
    out = env.step(act(env, u2=N_MOVES))
    assert out.done[0] and out.terminated[0].all() and not out.truncated[0].any() and not env.alive[0].any()
    assert out.rewards[0, 0] > cfg.w_win
    info = env.episode_info(0)
    assert info == {"win": 1.0, "points_held": 0.0, "enemies_killed": 1.0, "units_lost": 0.0}


def test_loss_by_elimination():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    place(env, {0: (5, 5)}, {0: (6, 5)}, hp={i: 0.0 for i in range(1, U)} | {0: 0.1}, react=1.0)
    out = env.step(act(env))
    assert out.done[0] and out.rewards[0, 0] < -CFG.w_win
    assert env.episode_info(0)["win"] == 0.0 and env.episode_info(0)["units_lost"] == 1.0


@pytest.mark.parametrize("ours, theirs, win", [([0, 1], [2], 1.0), ([0], [1, 2], 0.0), ([0], [2], 0.0)])
def test_points_decide_at_the_time_limit(ours, theirs, win):
    env = SkirmishBatch(cfg_with(max_steps=3), 1, seed=0)
    place(env, {i: POINTS[p] for i, p in enumerate(ours)}, {k: POINTS[p] for k, p in enumerate(theirs)})
    for _ in range(2):
        assert not env.step(act(env)).done[0]
    out = env.step(act(env))
    assert out.done[0] and out.terminated[0].all()
    assert env.episode_info(0)["win"] == win
    assert env.episode_info(0)["points_held"] == pytest.approx(len(ours) / 3)


def test_opponent_focuses_the_nearest_unit():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    # enemy 2 is ranged (range 5); units 5 (at 4) and 1 (at 3) are in range: it shoots unit 1
    place(env, {5: (14, 10), 1: (15, 10), 7: (18, 13)}, {2: (18, 10)}, react=1.0)
    out = env.step(act(env))
    assert env.last_target[0, 2] == 1
    assert env.hp[0, 1] == pytest.approx(env.max_hp[1] - CFG.ranged_damage)
    assert env.hp[0, 5] == env.max_hp[5] and out.rewards[0, 1] < 0
    # out of range but inside the aggro radius: it closes in on the nearest unit
    place(env, {0: (10, 10)}, {0: (14, 10)}, react=1.0)
    env.step(act(env))
    np.testing.assert_allclose(env.opos[0, 0], [13, 10])


def test_opponent_guards_its_point():
    env = SkirmishBatch(cfg_with(), 1, seed=0)
    place(env, {}, {4: (18, 10)}, react=1.0)                      # enemy 4 is in squad 1, which guards point 1
    for _ in range(15):
        env.step(act(env))
    assert np.linalg.norm(env.opos[0, 4] - np.array(POINTS[1])) < 1.5
    assert env.owner[0, 1] == -1


def _scripted_win_rate(difficulty: float, episodes: int = 12) -> float:
    cfg = cfg_with(difficulty=difficulty)
    env = SkirmishBatch(cfg, episodes, seed=5)
    lay, pol = _Layout(cfg), scripted_low(_Layout(cfg))
    goals = np.repeat(lay.P + np.arange(lay.G), lay.Q)[None].repeat(episodes, 0)   # squad s -> enemy squad s
    wins = np.full(episodes, np.nan)
    while np.isnan(wins).any():
        obs = np.concatenate([env.obs, _ground(env.obs, goals, lay)], -1)
        out = env.step(pol(SimpleNamespace(obs=obs, action_mask=env.action_mask)))
        for e in np.flatnonzero(out.done & np.isnan(wins)):
            wins[e] = env.episode_info(int(e))["win"]
    return float(wins.mean())


def test_difficulty_changes_the_opponents_strength():
    easy, hard = _scripted_win_rate(0.0), _scripted_win_rate(1.0)
    assert easy >= 0.75 and hard <= 0.25 and easy > hard


def test_random_play_loses_at_default_difficulty():
    env = SkirmishBatch(cfg_with(), 8, seed=1)
    rng = np.random.default_rng(0)
    wins = np.full(8, np.nan)
    while np.isnan(wins).any():
        out = env.step(np.where(env.action_mask, rng.random(env.action_mask.shape), -1).argmax(-1))
        for e in np.flatnonzero(out.done & np.isnan(wins)):
            wins[e] = env.episode_info(int(e))["win"]
    assert wins.mean() <= 0.25


# ---- goals -----------------------------------------------------------------------------------
def test_goal_grounding():
    cfg = cfg_with()
    env, lay = SkirmishBatch(cfg, 1, seed=0), _Layout(cfg)
    place(env, {0: (4, 4)}, {4: (8, 4), 5: (8, 7), 6: (4, 7)}, enemy_hp={7: 0.0, 3: 0.0})
    goals = np.array([[1, lay.P + 1, lay.P + lay.G + 6, lay.P + lay.G + 3] + [0] * (U - 4)])
    gf = _ground(env.obs[:, [0, 0, 0, 0] + [0] * (U - 4)], goals, lay)[0]
    np.testing.assert_allclose(gf[0], [(10 - 4) / 20, (10 - 4) / 20, np.hypot(6, 6) / 20, 0, 0], atol=1e-6)
    np.testing.assert_allclose(gf[1], [(20 / 3 - 4) / 20, 2 / 20, np.hypot(20 / 3 - 4, 2) / 20, 1, 0.75], atol=1e-6)
    np.testing.assert_allclose(gf[2], [0, 3 / 20, 3 / 20, 1, 1], atol=1e-6)
    np.testing.assert_allclose(gf[3], [0, 0, 0, 1, 0], atol=1e-6)              # destroyed target
    assert all(SCENARIO.build_layers(cfg)[0].goal_features_space.contains(g) for g in gf)


def test_scripted_low_attacks_in_range_else_moves_to_goal():
    cfg = cfg_with()
    env, lay = SkirmishBatch(cfg, 1, seed=0), _Layout(cfg)
    place(env, {0: (5, 5), 1: (5, 12)}, {0: (6, 5), 9: (8, 12)})
    goals = np.zeros((1, U), np.int64)                          # everybody -> point 0 at (10, 3.33)
    obs = np.concatenate([env.obs, _ground(env.obs, goals, lay)], -1)
    a = scripted_low(lay)(SimpleNamespace(obs=obs, action_mask=env.action_mask))[0]
    assert a[0] == N_MOVES + 0                                   # in range: attack
    assert a[2] == 1                                             # unit 2 at (0, 0) -> point 0: due east-ish (E)
    assert a[1] == 8                                             # (5, 12) -> (10, 3.3): south-east


# ---- batched == single copies, PettingZoo API, config errors -----------------------------------
def test_batch_equals_independent_copies():
    cfg = cfg_with(max_steps=40, difficulty=0.6)
    legal = lambda big, rng: np.where(big.action_mask, rng.random(big.action_mask.shape), -1).argmax(-1)  # noqa: E731
    assert assert_copies_match(lambda n, seed: SkirmishBatch(cfg, n, seed), 4, 90, legal) >= 4


def test_parallel_api():
    parallel_api_test(SkirmishParallelEnv(cfg_with()), num_cycles=100)
    parallel_seed_test(lambda: SkirmishParallelEnv(cfg_with()), num_cycles=50)
    env = SkirmishParallelEnv(cfg_with(n_squads=2, squad_size=3, n_points=2))
    obs, infos = env.reset(seed=0)
    assert len(obs) == 6 and infos["melee_0"]["action_mask"].shape == (N_MOVES + 6,)


@pytest.mark.parametrize("bad, word", [({"difficulty": 1.5}, "difficulty"), ({"layers": 4}, "layers"),
                                       ({"n_melee": 5}, "n_melee"), ({"n_squads": 0}, "n_squads")])
def test_bad_config_is_refused_with_a_fix(bad, word):
    with pytest.raises(ScenarioError) as err:
        SkirmishBatch(cfg_with(**bad), 1)
    assert word in str(err.value) and "fix:" in str(err.value)


def test_flat_shaping_is_the_goal_shaping_with_the_nearest_enemy_as_goal():
    """A flat team's optional shaping (w_int.low): -(distance to the nearest living enemy beyond the
    unit's range) + 2 x that enemy's hp lost this step; 0 unless w_int.low is set."""
    from hdppo.scenarios.skirmish import _Layout, flat_intrinsic
    from hdppo.team.scenario import LayerContext
    cfg = cfg_with()
    env = SkirmishBatch(cfg, 1, seed=0)
    place(env, {2: (5, 5), 3: (5, 6), 0: (12, 5)}, {0: (8, 5)}, enemy_hp={0: 0.5})
    before = env.obs.copy()
    env.step(act(env, u2=N_MOVES))                                   # unit 2 (ranged, range 5) hits enemy 0
    r = flat_intrinsic(_Layout(cfg))(LayerContext(env.obs, env.alive, prev_features=before))
    hp = env.o_enemy + 2                                              # enemy 0's hp fraction in a unit's obs
    lost = before[0, 2, hp] - env.obs[0, 2, hp]
    assert lost > 0
    assert r[0, 2] == pytest.approx(2.0 * lost, rel=1e-5)             # in range: only the damage term
    melee_gap = (12 - 8 - cfg.melee_range) / cfg.size                 # unit 0 is melee, 4 away from enemy 0
    assert r[0, 0] == pytest.approx(-melee_gap + 2.0 * lost, rel=1e-5)
    spec = {s.name: s for s in SCENARIO.build_layers(SCENARIO.make_config({"layers": 1}))}["low"]
    assert spec.intrinsic is not None and spec.w_int == 0.0
    weighted = SCENARIO.build_layers(SCENARIO.make_config({"layers": 1, "w_int.low": 0.1}))[0]
    assert weighted.w_int == 0.1


def _shaping_step(cfg: SkirmishConfig, flat: bool):
    """One hand-placed step (opponents idle) and the units' shaping of `unit_shaping` for it.

    Unit 2 (ranged) hits enemy 0 (hp 0.5) in range; unit 0 (melee, 4 from enemy 0) moves one step onto
    it; unit 1 (melee) walks one step west, away from point 1; unit 3 stands on point 2; the rest hold
    still in the far corner. Goals (3-layer team): units 0 and 2 enemy unit 0, unit 1 point 1, unit 3
    point 2, the rest point 0. Returns (shaping [U], distance shaping [U], hp enemy 0 lost, layout)."""
    from hdppo.scenarios.skirmish import flat_intrinsic, flat_progress_intrinsic, low_intrinsic, progress_intrinsic
    from hdppo.team.scenario import LayerContext
    env, lay = SkirmishBatch(cfg, 1, seed=0), _Layout(cfg)
    place(env, {2: (5, 5), 0: (12, 5), 1: (5, 12), 3: POINTS[2]}, {0: (8, 5)}, enemy_hp={0: 0.5})
    goals = np.zeros((1, U), np.int64)
    goals[0, [0, 2]] = lay.P + lay.G + 0
    goals[0, 1], goals[0, 3] = 1, 2
    before = env.obs.copy()
    env.step(act(env, u2=N_MOVES, u0=5, u1=5))                       # 5: west
    lost = before[0, 2, env.o_enemy + 2] - env.obs[0, 2, env.o_enemy + 2]
    if flat:
        ctx = LayerContext(env.obs, env.alive, prev_features=before)
        return flat_progress_intrinsic(lay)(ctx)[0], flat_intrinsic(lay)(ctx)[0], lost, lay
    ctx = LayerContext(env.obs, env.alive, goal_features=_ground(env.obs, goals, lay), prev_features=before,
                       prev_goal_features=_ground(before, goals, lay))
    return progress_intrinsic(lay)(ctx)[0], low_intrinsic(lay)(ctx)[0], lost, lay


def test_progress_shaping_pays_closing_in_holding_a_point_and_damage_never_a_cost_for_standing():
    """unit_shaping=progress: 0.1 x the move's length closed on the goal, 0.05 on its goal point, 2 x the
    goal enemy's hp lost plus 1 x the hp lost by enemies in range; where `distance` charges every step."""
    cfg = cfg_with()
    r, old, lost, lay = _shaping_step(cfg, flat=False)
    assert lost > 0
    assert r[2] == pytest.approx(3.0 * lost, rel=1e-5)                   # goal enemy hit from inside range
    assert r[0] == pytest.approx(0.1 + 2.0 * lost, rel=1e-5)             # closed one full move, goal enemy hurt
    away = (np.hypot(4 - 10, 12 - 10) - np.hypot(5 - 10, 12 - 10)) / cfg.speed
    assert r[1] == pytest.approx(-0.1 * away, rel=1e-4)                  # backed off 0.94 of a move
    assert r[3] == pytest.approx(0.05)                                   # on its goal point
    assert np.all(r[4:] == 0.0) and np.all(old[4:] < 0)                  # standing far away: no cost, unlike distance
    spec = SCENARIO.build_layers(SCENARIO.make_config({"unit_shaping": "progress"}))[-1]
    assert spec.name == "low" and spec.w_int == 0.1


def test_flat_progress_shaping_takes_the_nearest_enemy_as_goal():
    cfg = cfg_with(layers=1)
    r, old, lost, _ = _shaping_step(cfg, flat=True)
    assert lost > 0
    assert r[2] == pytest.approx(3.0 * lost, rel=1e-5)                   # nearest enemy hit from inside range
    assert r[0] == pytest.approx(0.1 + 2.0 * lost, rel=1e-5)             # closed one move on the nearest enemy
    assert r[4:] == pytest.approx(2.0 * lost, rel=1e-5)                  # standing: the nearest enemy's loss
    assert np.all(old[4:] < 2.0 * lost - 0.1)                            # which distance also pays, minus a cost
    spec = SCENARIO.build_layers(SCENARIO.make_config({"layers": 1, "unit_shaping": "progress"}))[0]
    assert spec.w_int == 0.0                                             # still off unless w_int.low is set


# ---- the units' goals while the layer above them is not trained (skills) ---------------------------
def _skill_worker(sampler: str, seed: int = 0, **keys: str):
    """A worker of a skill run (`--skills`: the units trained, the layers above untrained)."""
    from hdppo.engine.config import resolve_overrides, train_config_to_dict
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.worker import Worker, WorkerSpec
    names = ["high", "low"] if keys.get("layers") == "2" else ["high", "mid", "low"]
    tc, _ = resolve_overrides({"envs_per_worker": "6", "rollout": "8", "seed": str(seed)}, names, set())
    spec = WorkerSpec("skirmish", {"goal_sampler": sampler, **keys}, train_config_to_dict(tc), 0, ["low"])
    return Worker(spec, MemoryParams())


def test_team_goal_sampler_gives_the_whole_team_one_goal_per_decision():
    """goal_sampler=team: an untrained mid gives every unit of a copy the same goal, drawn anew at
    its decisions from the whole goal space, the same draws for the same seed; the uniform sampler
    gives each unit its own."""
    lay = _Layout(CFG)
    n_goals = lay.P + lay.G + lay.K
    seen, firsts = set(), []
    for seed in (0, 0, 1):
        w = _skill_worker("team", seed)
        draws = []
        for _ in range(3):
            w.collect()
            goals, alive = w.hier.goals[2], w.hier.alive[2]                  # [E, U], the units' goals
            first = np.take_along_axis(goals, alive.argmax(1)[:, None], 1)   # a living unit's goal
            assert (goals == first)[alive].all(), goals                      # the dead keep their last goal
            draws.append(first[:, 0].copy())
        seen |= set(np.concatenate(draws).tolist())
        firsts.append(np.stack(draws))
    np.testing.assert_array_equal(firsts[0], firsts[1])                      # seeded: the same run twice
    assert not np.array_equal(firsts[0], firsts[2])
    assert len(seen) > n_goals // 2 and max(seen) < n_goals
    w = _skill_worker("uniform")
    w.collect()
    goals = w.hier.goals[2]
    assert not (goals == goals[:, :1]).all(axis=1).any()


@pytest.mark.parametrize("key, value, fix", [("goal_sampler", "nearest", "team"), ("commander", "team", "broadcast"),
                                             ("unit_shaping", "closeness", "progress")])
def test_an_unknown_goal_sampler_commander_or_unit_shaping_is_refused(key, value, fix):
    with pytest.raises(ScenarioError) as err:
        SCENARIO.build_layers(cfg_with(**{key: value}))
    assert key in str(err.value) and fix in str(err.value)


@pytest.mark.parametrize("layers", ["2", "3"])
def test_a_broadcasting_commander_gives_its_whole_team_one_goal(layers):
    """commander=broadcast: the top layer's one goal goes to all its children (the units with
    layers=2, the squads with 3), even drawn uniformly; per_child (the default) gives each its own."""
    for commander, one in (("broadcast", True), ("per_child", False)):
        w = _skill_worker("uniform", layers=layers, commander=commander)
        assert w.hier.specs[0].choice == commander
        w.collect()
        goals, alive = w.hier.goals[1], w.hier.alive[1]                     # the top layer's children
        first = np.take_along_axis(goals, alive.argmax(1)[:, None], 1)
        same = ((goals == first) | ~alive).all(1)
        assert same.all() if one else not same.all(), goals
