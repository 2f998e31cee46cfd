"""The transfer study's metric (examples/evidence/transfer.py) against values worked out by hand: the
first point of a curve at the threshold, the fraction of the budget per seed with and without the
source frames, its Student-t interval and verdict, the arms' commands, and the summary of hand-made
run folders (curves and cached evals, nothing trained)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from examples.evidence.transfer import (
    FINETUNED,
    FLAT,
    PLANS,
    PRETRAIN,
    SHAPED,
    SKILLS,
    TRANSFER,
    Task,
    TransferPlan,
    arm_commands,
    check_budget,
    configure,
    done,
    first_reach,
    fits,
    fractions,
    from_records,
    judge,
    markdown,
    run,
    stale_records,
    summarize,
    versus,
)
from examples.studies.protocol import EVAL_SEED, check_runs, data_file, read_records, write_records
from hdppo.engine.metrics import MetricsSink


def test_the_first_curve_point_at_or_above_the_threshold():
    x, y = [100, 200, 300], [0.1, 0.5, 0.4]
    assert first_reach(x, y, 0.45) == 200
    assert first_reach(x, y, 0.5) == 200          # at counts
    assert first_reach(x, y, 0.1) == 100
    assert first_reach(x, y, 0.6) is None
    assert first_reach([], [], 0.0) is None


def test_fractions_of_the_budget_with_and_without_the_source_frames():
    assert fractions([200, None, 300], 1000) == [0.2, None, 0.3]
    assert fractions([200, None, 300], 1000, before=[100, 100, 50]) == [0.3, None, 0.35]


def test_the_interval_and_the_verdict_by_hand():
    # [0.1, 0.2, 0.3]: sd 0.1, t(0.975, 2) = 4.302653, half = 4.302653 * 0.1 / sqrt(3) = 0.248414
    j = judge([0.1, 0.2, 0.3])
    assert j["ci"] == pytest.approx((0.2, -0.048414, 0.448414), abs=1e-6)
    assert j["reached"] == 3 and j["verdict"] == "mean only"         # the mean is <= 0.3, the interval is not
    # [0.1, 0.12, 0.14]: sd 0.02, half = 4.302653 * 0.02 / sqrt(3) = 0.049683
    j = judge([0.1, 0.12, 0.14])
    assert j["ci"] == pytest.approx((0.12, 0.070317, 0.169683), abs=1e-6) and j["verdict"] == "meets"
    assert judge([0.3, 0.3])["verdict"] == "meets"                     # equal to the goal, no spread
    assert judge([0.1, 0.1], goal=0.05)["verdict"] == "does not meet"
    assert judge([0.4, 0.5])["verdict"] == "does not meet"             # mean 0.45 above 0.3
    j = judge([0.1, None, 0.2])                                        # a seed that never reached it
    assert j["reached"] == 2 and j["ci"][0] == pytest.approx(0.15) and j["verdict"] == "does not meet"
    assert judge([0.1])["verdict"] == "not judged"


def test_sooner_or_later_than_the_baseline_only_where_the_interval_excludes_zero():
    # [0.1, 0.2] minus [0.5, 0.6]: -0.4, se = sqrt(0.005 / 2 * 2) = 0.0707107, dof 2, t = 4.302653
    assert versus([0.1, 0.2], [0.5, 0.6]) == {"diff": pytest.approx((-0.4, -0.704243, -0.095757), abs=1e-5),
                                              "reading": "sooner"}
    assert versus([0.5, 0.6], [0.1, 0.2])["reading"] == "later"
    assert versus([0.1, 0.6], [0.3, 0.4])["reading"] == "not apart"
    # a seed that never reached the threshold is left out; one seed left gives no interval
    out = versus([0.1, None], [0.5, 0.6])
    assert out["reading"] == "not judged" and np.isnan(out["diff"]).all()


def test_the_arms_commands():
    plan = dataclasses.replace(PLANS["skirmish"], out=Path("OUT"))
    assert plan.arms() == [TRANSFER, FLAT, SHAPED, FINETUNED]
    skills, transfer = plan.command(SKILLS, 0), plan.command(TRANSFER, 0)
    assert skills[2] == "skirmish" and "--skills" in skills and "size=32" not in skills
    assert skills[skills.index("--steps") + 1] == "200000" and "interval.mid=16" in skills
    assert transfer[transfer.index("--layer") + 1] == "high,mid" and "low=OUT/skills-seed0" in transfer
    assert transfer[transfer.index("--steps") + 1] == "1000000" and {"size=32", "difficulty=0.6"} <= set(transfer)
    assert "interval.mid=16" not in transfer                           # the skill run's keys only
    pre, tuned = plan.command(PRETRAIN, 1), plan.command(FINETUNED, 1)
    assert "size=32" not in pre and "w_int.low=0.1" in pre and pre[pre.index("--layer") + 1] == "all"
    assert "low=OUT/pretrain-seed1" in tuned and "size=32" in tuned and "w_int.low=0.1" in tuned
    flat = plan.command(FLAT, 2)
    assert "--load" not in flat and "size=32" in flat and "layers=1" in flat and "w_int.low=0.1" not in flat
    assert [job[0].name for job in plan.jobs(0)] == ["skills-seed0", "transfer-seed0", "flat-seed0",
                                                     "flat_shaped-seed0", "pretrain-seed0", "finetuned-seed0"]
    warehouse = PLANS["warehouse"]
    assert warehouse.arms() == [TRANSFER, FLAT, FINETUNED] and warehouse.args(FINETUNED) == ["layers=1"]
    with pytest.raises(ValueError, match="finetune_from"):
        dataclasses.replace(warehouse, finetune_from=SHAPED)


def test_the_orders_plan_shares_the_warehouse_flat_runs_and_differs_in_its_skills_only():
    args = argparse.Namespace(set=[], seeds=[0], out="OUT", steps=None, skill_steps=None, pretrain_steps=None,
                              episodes=None, threshold=None)
    base, orders = configure(PLANS["warehouse"], args), configure(PLANS["warehouse_orders"], args)
    assert orders.out == base.out == Path("OUT/transfer-warehouse") and orders.name != base.name
    for r in (FLAT, PRETRAIN, FINETUNED):                                # the same folders, the same commands
        assert orders.run_dir(r, 0) == base.run_dir(r, 0) and orders.command(r, 0) == base.command(r, 0)
    for r in (SKILLS, TRANSFER):
        assert orders.run_dir(r, 0) == Path(f"OUT/transfer-warehouse/{r}-orders-seed0")
        cmd, old = orders.command(r, 0), base.command(r, 0)
        renamed = [a.replace("skills-seed0", "skills-orders-seed0").replace("transfer-seed0", "transfer-orders-seed0")
                   for a in old]
        assert "off_goal_pick=-1" in cmd and [a for a in cmd if a != "off_goal_pick=-1"] == renamed


# ---- the summary of hand-made runs ---------------------------------------------------------------
BUDGET = 10_000


def _run(run: Path, points: list[tuple[int, float]], final: list[float], frames: int = BUDGET,
         eval_seed: int = 12345, random_commander: list[float] | None = None,
         moved: tuple[dict[str, str], list[float]] | None = None) -> None:
    """A finished run: its training curve (metrics/run.csv) and its cached final eval (and that with
    its commander `high`, grid's top layer, uniformly random; and that played with `moved`'s scenario
    overrides)."""
    run.mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"env_steps": frames, "finished": True}))
    (run / "config.json").write_text(json.dumps({"scenario": "grid", "scenario_overrides": {}, "train": {},
                                                 "layers": [], "layer_names": [], "frozen": {}}))
    sink = MetricsSink(run, tensorboard=False)
    for step, value in points:
        sink.log("run", step, {"win": value, "episodes": 100})
    sink.close()
    seed = int(run.name.rpartition("seed")[2])
    records = [{"win": w, "team_return": 1.0} for w in final]
    (run / "evidence_eval.json").write_text(json.dumps({
        "key": {"episodes": len(final), "seed": eval_seed + seed, "env_steps": frames}, "records": records,
        "goals": {"low": {"all": [10, 4]}}}))
    if random_commander is not None:
        (run / "evidence_eval-uniform-high.json").write_text(json.dumps({
            "key": {"episodes": len(final), "seed": eval_seed + seed, "env_steps": frames},
            "records": [{"win": w, "team_return": 0.0} for w in random_commander]}))
    if moved is not None:
        (run / "evidence_eval-moved.json").write_text(json.dumps({
            "key": {"episodes": len(final), "seed": eval_seed + seed, "env_steps": frames, "overrides": moved[0]},
            "records": [{"win": w, "team_return": 0.0} for w in moved[1]]}))


def test_the_summary_by_hand(tmp_path):
    plan = TransferPlan(name="t", outcome="win", source=Task("grid"), target=Task("grid", ["size=9"]),
                        steps=BUDGET, skill_steps=1000, pretrain_steps=4000, flat=["layers=1"],
                        flat_shaped=["layers=1", "ent_coef=0.05"], hier=["layers=2"], then="high", seeds=[0, 1],
                        eval_episodes=2, out=tmp_path, rate=True)
    for seed in (0, 1):
        # the from-scratch flat teams: `flat` ends at 0.6 in both seeds (its eval 0.5 beats flat_shaped's 0.25)
        _run(plan.run_dir(FLAT, seed), [(1000, 0.2), (5000, 0.6), (BUDGET, 0.6)], [0.5, 0.5])
        _run(plan.run_dir(SHAPED, seed), [(1000, 0.1), (BUDGET, 0.9)], [0.0, 0.5])
        # the skill library's own team: 0.5 (seed 0) and 1.0 (seed 1) at home, 0.0 and 0.5 on the target
        _run(plan.run_dir(SKILLS, seed), [], [0.5 * (seed + 1)] * 2, frames=1000,
             moved=({"size": "9"}, [0.5 * seed] * 2))
        _run(plan.run_dir(PRETRAIN, seed), [], [0.0, 0.0], frames=4000)
    # the transfer arm reaches 0.6 at 2000 (seed 0) and 3000 (seed 1): 0.2 and 0.3 of the budget
    # its commander made random: 0.5 and 0.0 (trained minus random: 0.5 in both seeds)
    _run(plan.run_dir(TRANSFER, 0), [(1000, 0.3), (2000, 0.7), (BUDGET, 0.8)], [1.0, 1.0], random_commander=[1.0, 0.0])
    _run(plan.run_dir(TRANSFER, 1), [(1000, 0.5), (3000, 0.6), (BUDGET, 0.7)], [1.0, 0.0], random_commander=[0.0, 0.0])
    # the fine-tuned team: seed 0 at 1000 (0.1), seed 1 never
    _run(plan.run_dir(FINETUNED, 0), [(1000, 0.6), (BUDGET, 0.6)], [0.5, 0.5])
    _run(plan.run_dir(FINETUNED, 1), [(1000, 0.2), (BUDGET, 0.5)], [0.5, 0.5])
    s = summarize(plan)
    assert s["reference"] == FLAT and s["threshold"] == pytest.approx(0.6)
    assert s["threshold_source"] == "reference final"
    arms = s["arms"]
    assert arms[TRANSFER]["per_seed"] == [1.0, 0.5] and arms[SHAPED]["per_seed"] == [0.25, 0.25]
    t = arms[TRANSFER]["to_threshold"]
    assert t["steps"] == [2000, 3000]
    # [0.2, 0.3]: sd 0.0707107, t(0.975, 1) = 12.706205, half = 12.706205 * 0.0707107 / sqrt(2) = 0.635310
    assert t["fraction"]["ci"] == pytest.approx((0.25, -0.38531, 0.88531), abs=1e-5)
    assert t["fraction"]["verdict"] == "mean only"
    # counting the skill runs' 1000 frames: [0.3, 0.4], mean 0.35 above 0.3
    assert t["counted"]["per_seed"] == pytest.approx([0.3, 0.4]) and t["counted"]["verdict"] == "does not meet"
    # against the reference's own fractions, [0.5, 0.5] (no spread): Welch se = 0.0707107 / sqrt(2) = 0.05
    # with 1 degree of freedom, half = 12.706205 * 0.05 = 0.635310
    vs = s["versus_reference"]
    assert vs["fraction"]["diff"] == pytest.approx((-0.25, -0.88531, 0.38531), abs=1e-5)
    assert vs["counted"]["diff"] == pytest.approx((-0.15, -0.78531, 0.48531), abs=1e-5)
    assert vs["fraction"]["reading"] == vs["counted"]["reading"] == "not apart"
    f = arms[FINETUNED]["to_threshold"]
    assert f["steps"] == [1000, None] and f["fraction"]["verdict"] == "does not meet"
    assert f["counted"]["per_seed"] == [pytest.approx(0.5), None]       # (4000 + 1000) / 10000
    assert arms[TRANSFER]["source_frames"] == [1000, 1000] and arms[FINETUNED]["source_frames"] == [4000, 4000]
    assert arms[TRANSFER]["goal_success"]["low"]["per_seed"] == [0.4, 0.4]
    assert "counted" not in arms[FLAT]["to_threshold"]
    why = s["why"]                       # the protocol's diagnostics of the transfer arm's fresh commander
    assert why["top"] == "high" and why["n_goals"] == 4
    assert why["random_top"]["per_seed"] == [0.5, 0.0]
    assert why["random_top"]["trained_minus_random"] == pytest.approx((0.5, 0.5, 0.5))   # paired: no spread
    assert np.isnan(why["entropy"]["per_seed"]).all()                  # no metrics/high.csv in these runs
    page = markdown(plan, s, "t.png", "python examples/evidence/transfer.py")
    assert "## Why the transfer arm does not meet the target" in page
    assert ("the transfer arm's fraction minus `flat`'s is **-0.250 [-0.885, 0.385]** (Welch, 95%, over the seeds "
            "that reached it), not shown apart from it (the interval holds 0); counting the source frames, "
            "-0.150 [-0.785, 0.485]") in page
    assert "| final win with `high` uniformly random (`hdppo eval --uniform high`) | 0.250" in page
    assert "its choices matter" in page
    assert "**Verdict: the transfer arm" in page
    partial = markdown(plan, {**s, "pending": [2, 3, 4]}, "t.png", "python examples/evidence/transfer.py")
    assert "**Verdict so far (2 of 5 seeds): the transfer arm" in partial and "**Verdict:" not in partial
    alone = s["skills_alone"]
    assert alone["source"]["per_seed"] == [0.5, 1.0] and alone["target"]["per_seed"] == [0.0, 0.5]
    assert alone["target_minus_source"] == pytest.approx((-0.5, -0.5, -0.5))
    assert "**The skill library alone**" in page and "the move changes it by -0.500" in page
    # one seed is not judged, so its page does not say the arm misses the target
    one = dataclasses.replace(plan, seeds=[0])
    page = markdown(one, summarize(one), "t.png", "python examples/evidence/transfer.py")
    assert "not judged (fewer than 2 seeds)" in page and "does not meet the target" not in page
    assert "## What the transfer arm's parts do" in page


# ---- the seeds' records (the report's data file) -------------------------------------------------
def _plan(out: Path, seeds: list[int] | None = None) -> TransferPlan:
    return TransferPlan(name="t", outcome="win", source=Task("grid"), target=Task("grid", ["size=9"]),
                        steps=BUDGET, skill_steps=1000, pretrain_steps=4000, flat=["layers=1"],
                        flat_shaped=["layers=1", "ent_coef=0.05"], hier=["layers=2"], then="high",
                        seeds=seeds or [0], eval_episodes=2, out=out, common=["workers=1"], rate=True)


def _record(plan: TransferPlan, arm: str, seed: int, final: float = 0.5,
            curve: tuple[list[float], list[float]] = ([1000.0, BUDGET], [0.2, 0.6])) -> dict:
    """A data-file record of one arm's seed, as run_record writes it (configs as its commands make them)."""
    from examples.studies.same_run import resolved_config
    source = arm in (TRANSFER, FINETUNED)
    return {"arm": arm, "seed": seed, "budget": plan.budgets(), "eval_episodes": plan.eval_episodes,
            "eval_seed": EVAL_SEED + seed, "commands": [" ".join(c) for c in arm_commands(plan, arm, seed)],
            "configs": [resolved_config(cmd[2:]) for cmd in arm_commands(plan, arm, seed)],
            "provenance": [None] * (1 + source), "frames": BUDGET, "source_frames": 1000 if source else None,
            "minutes": 1.0, "source_minutes": 0.5 if source else None, "curve": [list(curve[0]), list(curve[1])],
            "final": final, "team_return": 2.0, "also": {}, "goals": {"low": {"all": [10, 5]}} if source else {}}


def test_a_data_file_record_stands_in_for_an_arm_only_while_it_fits_and_its_runs_are_not_finished(tmp_path):
    plan = _plan(tmp_path)
    known = {(TRANSFER, 0): _record(plan, TRANSFER, 0)}
    assert list(from_records(plan, known)) == [(TRANSFER, 0)] and fits(plan, known[TRANSFER, 0], TRANSFER, 0)
    assert done(plan, TRANSFER, 0, known) and not done(plan, FLAT, 0, known)
    for change in ({"budget": {**plan.budgets(), "skill_steps": 2000}}, {"eval_episodes": 7}, {"eval_seed": 1},
                   {"seed": 1}, {"arm": FLAT}):
        assert not from_records(plan, {(TRANSFER, 0): {**known[TRANSFER, 0], **change}})
    assert not from_records(dataclasses.replace(plan, also=["deliveries"]), known)     # a key the record lacks
    assert not from_records(dataclasses.replace(plan, pretrain_steps=5000), known)     # any of the three budgets
    _run(plan.run_dir(TRANSFER, 0), [], [1.0, 1.0])        # the arm's run, but not its skill run: the record
    assert list(from_records(plan, known)) == [(TRANSFER, 0)]
    _run(plan.run_dir(SKILLS, 0), [], [0.0, 0.0], frames=1000)   # both finished here: they are read instead
    assert not from_records(plan, known) and done(plan, TRANSFER, 0, {})


def test_a_record_made_with_other_settings_is_refused_naming_them(tmp_path):
    plan = _plan(tmp_path)
    known = {(arm, 0): _record(plan, arm, 0) for arm in plan.arms()}
    check_runs(plan, check_budget, known, stale_records)                 # as their commands make them: fine
    known[FINETUNED, 0]["configs"][0]["train"]["layers"]["low"]["epochs"] = 4     # its source run's, as if a
    known[TRANSFER, 0]["configs"][1]["scenario_config"]["size"] = 7              # default changed; its own run's
    assert stale_records(plan, known) == {"transfer seed 0": ["scenario_config.size: 7 in the run, 9 now"],
                                          "finetuned seed 0": ["train.layers.low.epochs: 4 in the run, 16 now"]}
    with pytest.raises(SystemExit, match=r"(?s)data file.*transfer seed 0: scenario_config.size.*fix: take"):
        check_runs(plan, check_budget, known, stale_records)


def test_the_data_file_keeps_the_records_of_seeds_a_report_did_not_cover(tmp_path):
    plan = _plan(tmp_path)
    path = tmp_path / "docs" / "t-runs.json"
    old = {(FLAT, 0): _record(plan, FLAT, 0, final=0.1), (FINETUNED, 3): _record(plan, FINETUNED, 3, final=0.3)}
    write_records(path, [_record(plan, FLAT, 0, final=0.9), _record(plan, TRANSFER, 0)], old, plan.arms())
    rows = json.loads(path.read_text())
    assert [(r["arm"], r["seed"]) for r in rows] == [(TRANSFER, 0), (FLAT, 0), (FINETUNED, 3)]   # the plan's order
    got = read_records(path)
    assert got[FLAT, 0]["final"] == 0.9 and got[FINETUNED, 3]["final"] == 0.3    # the new record replaces the old


def _report_args(tmp_path: Path, seeds: list[int], report_only: bool = True) -> argparse.Namespace:
    return argparse.Namespace(report_only=report_only, write=str(tmp_path / "docs"), tag="", seeds=seeds)


def test_the_report_from_records_alone_reads_the_threshold_off_their_curves(tmp_path):
    plan = _plan(tmp_path / "runs", seeds=[0, 1])
    known = {}
    for seed in (0, 1):       # the flat team ends at 0.6 (the reference: its eval 0.5 beats flat_shaped's 0.2)
        known[FLAT, seed] = _record(plan, FLAT, seed, 0.5, ([1000, 5000, BUDGET], [0.2, 0.6, 0.6]))
        known[SHAPED, seed] = _record(plan, SHAPED, seed, 0.2, ([1000, BUDGET], [0.1, 0.9]))
        known[FINETUNED, seed] = _record(plan, FINETUNED, seed, 0.4, ([1000, BUDGET], [0.2, 0.5]))
    known[TRANSFER, 0] = _record(plan, TRANSFER, 0, 1.0, ([1000, 2000, BUDGET], [0.3, 0.7, 0.8]))
    write_records(data_file(plan, _report_args(tmp_path, [0, 1])), list(known.values()), {}, plan.arms())
    with pytest.raises(SystemExit, match=r"no seed of \[1\] has all four arms .*fix: run the same command without"):
        run(dataclasses.replace(plan, seeds=[1]), _report_args(tmp_path, [1]), "x", log=lambda _: None)
    s = run(plan, _report_args(tmp_path, [0, 1]), "x", log=lambda _: None)     # seed 1 lacks its transfer arm
    assert s["pending"] == [1] and {(r["arm"], r["seed"]) for r in s["records"]} == {(a, 0) for a in plan.arms()}
    assert s["threshold"] == pytest.approx(0.6) and s["arms"][TRANSFER]["per_seed"] == [1.0]
    assert s["arms"][TRANSFER]["to_threshold"]["steps"] == [2000.0]              # first_reach on the record's curve
    assert s["arms"][TRANSFER]["to_threshold"]["counted"]["per_seed"] == [pytest.approx(0.3)]   # + 1000 skill frames
    assert s["arms"][TRANSFER]["goal_success"]["low"]["per_seed"] == [0.5]
    assert s["arms"][FINETUNED]["source_frames"] == [1000] and s["arms"][FLAT]["minutes"] == [1.0]
    text = (tmp_path / "docs" / "t.md").read_text()
    assert "**Incomplete**: seeds [1] of this command are not finished; this report covers seeds [0]" in text
    assert "(12 training runs; finished ones are reused)" in text and "predates provenance records" in text
    assert "Against the better flat arm" not in text        # one seed of the transfer arm: nothing to compare
    assert sorted(read_records(tmp_path / "docs" / "t-runs.json")) == sorted(known)     # seed 1's records kept
