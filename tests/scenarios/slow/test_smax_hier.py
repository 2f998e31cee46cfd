"""SMAX's target hierarchy (`hier=true`): the units' grounded goal is their enemy's vector and health
in SMAX's own state, goal success fires when that enemy dies, scripted squads pass their target on,
`hdppo check` passes on every map, a short 3-layer training on 3m evaluates, and the flat team's
goal-free shaping pays what each unit's nearest enemy lost; the upper layers choose among the
living enemies. The 3m tests step 3 copies, as tests/sims/slow/test_jaxmarl.py does: each number of
copies compiles SMAX's step again (seconds), so they share one."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from hdppo.scenarios.smax_3m import SCENARIO
from hdppo.sims.smax_hier import Sizes, scripted_low, scripted_mid
from hdppo.team.check import run_check
from hdppo.team.hierarchy import HierarchyEnv
from tests.helpers import JAXMARL, TINY_CLI
from tests.helpers.cli import cli

pytestmark = JAXMARL

RUN = [a if a != "envs_per_worker=2" else "envs_per_worker=8" for a in TINY_CLI]
CFG = SCENARIO.make_config({"hier": "true"})


@functools.cache
def sz() -> Sizes:
    """3m's hierarchy sizes, made at first use (they build a JaxMARL env: not at collection)."""
    return Sizes(CFG)


def smax_truth(batch) -> tuple[np.ndarray, np.ndarray]:
    """Positions [E, K, 2] and health fractions [E, K] from SMAX's own jitted state."""
    inner, env = batch._state.state, batch.env
    hp = np.asarray(inner.unit_health) / np.asarray(env.unit_type_health)[np.asarray(inner.unit_types)]
    return np.asarray(inner.unit_positions), np.where(np.asarray(inner.unit_alive), hp, 0.0)


def driver(rng: np.random.Generator):
    """Random commander, scripted squads (pass-through) and units (attack the goal enemy)."""
    mid, low = scripted_mid(sz()), scripted_low(sz())

    def act(d):
        if d.layer == 0:
            return rng.integers(0, sz().K, d.mask.shape)
        return (mid if d.layer == 1 else low)(d)
    return act


def test_units_goal_is_their_enemys_vector_and_health_in_smax_state() -> None:
    hier = HierarchyEnv(SCENARIO, CFG, n_envs=3, seed=0)
    hier.reset(0)
    act, checked = driver(np.random.default_rng(0)), 0
    for _ in range(40):
        hier.step(act)
        pos, hp = smax_truth(hier.env)
        goals = hier.goals[2]
        g = hier.goal_features(2)
        enemy = np.take_along_axis(pos[:, sz().A:], goals[..., None], 1)
        enemy_hp = np.take_along_axis(hp[:, sz().A:], goals, 1)
        live = (hp[:, :sz().A] > 0) & (enemy_hp > 0)
        want = (enemy - pos[:, :sz().A]) / 32.0
        np.testing.assert_allclose(g[..., :2][live], want[live], atol=1e-5)
        np.testing.assert_allclose(g[..., 3], enemy_hp, atol=1e-5)
        np.testing.assert_array_equal(g[..., 4], enemy_hp > 0)
        np.testing.assert_array_equal(g[..., 5:].argmax(-1), goals)
        checked += int(live.sum())
    assert checked > 100


def test_scripted_squads_pass_their_target_to_every_unit() -> None:
    hier = HierarchyEnv(SCENARIO, CFG, n_envs=3, seed=1)
    hier.reset(1)
    act = driver(np.random.default_rng(1))
    squad_of = np.arange(sz().A) // sz().Q
    for _ in range(12):
        hier.step(act)
        if hier.t.max() % 4 == 1:                    # just after the squads decided
            live = hier.alive[2]
            np.testing.assert_array_equal(hier.goals[2][live], hier.goals[1][:, squad_of][live])


def test_goal_success_fires_when_the_assigned_enemy_dies() -> None:
    hier = HierarchyEnv(SCENARIO, CFG, n_envs=3, seed=2)
    hier.reset(2)
    act = driver(np.random.default_rng(2))
    success = hier.specs[1].goal_success
    fired = quiet = 0
    for _ in range(60):
        before = smax_truth(hier.env)[1][:, sz().A:] > 0
        hier.step(act)                   # hooks ran on the terminal state; autoreset may follow
        after = smax_truth(hier.env)[1][:, sz().A:] > 0
        goals = hier.goals[2]
        ctx = hier.context(2)
        got = success(ctx)
        died = np.take_along_axis(before & ~after, goals, 1)
        same = hier.t > 0                            # copies that did not reset at this step
        np.testing.assert_array_equal(got[same], died[same])
        fired += int(got[same].sum())
        quiet += int((~got[same]).sum())
    assert fired > 0 and quiet > 0
    counts = hier.pop_goal_counts()
    assert counts["low"][1] > 0 and counts["mid"][1] > 0


def test_the_commander_and_squads_choose_among_the_enemies_alive_in_smax_state() -> None:
    """At every decision of the upper layers the action mask is SMAX's own living enemies (any
    while none is left), so a uniform commander never names a dead enemy once some are killed."""
    from hdppo.team.controllers import uniform_policy
    hier = HierarchyEnv(SCENARIO, CFG, n_envs=3, seed=3)
    hier.reset(3)
    pols = [uniform_policy(inf, 7 + inf.index) for inf in hier.info]
    low, checked, some_dead = scripted_low(sz()), 0, 0

    def act(d):
        nonlocal checked, some_dead
        if d.layer == 2:
            return low(d)
        living = smax_truth(hier.env)[1][:, sz().A:] > 0                          # [E, K]
        want = np.where(living.any(-1, keepdims=True), living, True)[:, None]
        np.testing.assert_array_equal(d.action_mask, np.broadcast_to(want, d.action_mask.shape))
        a = pols[d.layer](d)
        assert np.take_along_axis(d.action_mask, a[..., None], -1)[d.mask].all()
        checked += 1
        some_dead += int((~living).any())
        return a
    for _ in range(80):
        hier.step(act)
    assert checked > 10 and some_dead > 0, "no decision was made after an enemy died"


def test_with_hold_a_units_target_changes_only_once_that_enemy_died() -> None:
    """hold=true: under a uniform commander and squads, a unit's enemy changes inside an episode only
    where the enemy it held was dead in SMAX's own state at that decision; and targets do change."""
    from hdppo.team.controllers import uniform_policy
    hier = HierarchyEnv(SCENARIO, SCENARIO.make_config({"hier": "true", "hold": "true"}), n_envs=3, seed=5)
    hier.reset(5)
    pols = [uniform_policy(inf, 11 + inf.index) for inf in hier.info]
    low = scripted_low(sz())
    changed = 0
    for _ in range(120):
        held, fresh = hier.goals[2].copy(), np.asarray(hier.t) == 0
        living = smax_truth(hier.env)[1][:, sz().A:] > 0                          # [E, K] at this step's decisions
        was_alive = np.take_along_axis(living, held, axis=1)
        done = hier.step(lambda d: low(d) if d.layer == 2 else pols[d.layer](d)).done   # a done copy resets
        moved = (hier.goals[2] != held) & ~(fresh | done)[:, None]
        assert not (moved & was_alive).any(), "a unit lost a target that was still alive"
        changed += int(moved.sum())
    assert changed > 0, "no unit's target died and was replaced"


def random_legal(rng: np.random.Generator):
    """Uniform legal actions for the units (the flat team's only layer)."""
    def act(d):
        p = np.asarray(d.action_mask, float) * rng.random(d.action_mask.shape)
        return p.argmax(-1)
    return act


def test_the_flat_shaping_pays_each_unit_what_its_nearest_enemy_lost_in_smax_state() -> None:
    """Same seed and actions, w_int.low 0.1 against 0: the difference of the units' returns each step
    is 0.1 x the health fraction the unit's nearest living enemy lost, read from SMAX's own state."""
    shaped, plain = (HierarchyEnv(SCENARIO, SCENARIO.make_config({"w_int.low": w}), n_envs=3, seed=3)
                     for w in ("0.1", "0.0"))
    for env in (shaped, plain):
        env.reset(3)
    act_a, act_b = random_legal(np.random.default_rng(3)), random_legal(np.random.default_rng(3))
    paid = 0
    for _ in range(40):
        pos, hp = smax_truth(shaped.env)
        gap = shaped.layers[0].ep_return - plain.layers[0].ep_return
        shaped.step(act_a)
        plain.step(act_b)
        near = np.where(hp[:, None, sz().A:] > 0,
                        np.linalg.norm(pos[:, :sz().A, None] - pos[:, None, sz().A:], axis=-1), np.inf).argmin(-1)
        lost = np.take_along_axis(hp[:, sz().A:], near, 1) - \
            np.take_along_axis(smax_truth(shaped.env)[1][:, sz().A:], near, 1)
        want = np.where((hp[:, :sz().A] > 0) & (hp[:, sz().A:] > 0).any(-1, keepdims=True), np.clip(lost, 0, 1), 0.0)
        same = shaped.t > 0                          # copies that did not reset at this step
        got = (shaped.layers[0].ep_return - plain.layers[0].ep_return - gap) / 0.1
        np.testing.assert_allclose(got[same], want[same], atol=1e-5)
        paid += int((want[same] > 0).sum())
    assert paid > 10


@pytest.mark.parametrize("target", ["smax_3m", "smax_2s3z", "smax_5m_vs_6m", "smax_3s5z",
                                    "smax_smacv2_10_units"])
def test_the_target_hierarchy_passes_check(target) -> None:
    report = run_check(target, {"hier": "true"}, episodes=1, n_envs=2, seed=0, api_cycles=20)
    assert report.ok, [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]


def test_short_hierarchical_training_on_3m_then_eval_reports_wins_and_goal_success(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "smax_3m", "hier=true", "--steps", "3000", *RUN, "--out", run)
    assert rc == 0, err
    rc, out, err = cli(capsys, "eval", run, "--episodes", "8", "--json")
    assert rc == 0, err
    outcomes = json.loads((run / "eval.json").read_text())["outcomes"]
    assert 0.0 <= outcomes["win"][0] <= 1.0
    for layer in ("mid", "low"):
        assert 0.0 <= outcomes[f"goal_success/{layer}"][0] <= 1.0


def _skill_worker(sampler: str, seed: int = 0):
    """A worker of a skill run on 3m (`--skills`: the units trained, commander and squads not)."""
    from hdppo.engine.config import resolve_overrides, train_config_to_dict
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.worker import Worker, WorkerSpec
    tc, _ = resolve_overrides({"envs_per_worker": "3", "rollout": "16", "seed": str(seed)}, ["high", "mid", "low"],
                              set())
    spec = WorkerSpec("smax_3m", {"hier": "true", "goal_sampler": sampler}, train_config_to_dict(tc), 0, ["low"])
    return Worker(spec, MemoryParams())


def test_the_team_sampler_sends_every_squad_of_a_copy_at_one_enemy_in_a_skill_run() -> None:
    """goal_sampler=team: in a skill run's worker the untrained commander gives both squads of a copy
    one enemy at each decision (drawn anew, so targets vary); the uniform default gives each its own."""
    w = _skill_worker("team")
    seen = set()
    for _ in range(3):
        w.collect()
        goals, alive = w.hier.goals[1], w.hier.alive[1]                        # [E, 2] the squads' targets
        both = alive.all(1)
        assert both.any() and (goals[both, 0] == goals[both, 1]).all(), goals
        seen |= set(goals[both, 0].tolist())
    assert len(seen) > 1
    w = _skill_worker("uniform")
    differ = 0
    for _ in range(3):
        w.collect()
        goals, alive = w.hier.goals[1], w.hier.alive[1]
        differ += int((goals[alive.all(1), 0] != goals[alive.all(1), 1]).sum())
    assert differ > 0


def test_a_goal_sampler_without_the_hierarchy_or_unknown_is_refused() -> None:
    from hdppo.errors import ScenarioError
    with pytest.raises(ScenarioError, match=r"(?s)hier is off.*add hier=true"):
        SCENARIO.build_layers(SCENARIO.make_config({"goal_sampler": "team"}))
    with pytest.raises(ScenarioError, match=r"(?s)goal_sampler='focus' is not a goal sampler.*uniform, team"):
        SCENARIO.build_layers(SCENARIO.make_config({"hier": "true", "goal_sampler": "focus"}))
