"""The transfer study's metric (examples/evidence/transfer.py) against values worked out by hand: the
first point of a curve at the threshold, the fraction of the budget per seed with and without the
source frames, its Student-t interval and verdict, the arms' commands, and the summary of hand-made
run folders (curves and cached evals, nothing trained)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

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
    first_reach,
    fractions,
    judge,
    summarize,
)
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


# ---- the summary of hand-made runs ---------------------------------------------------------------
BUDGET = 10_000


def _run(run: Path, points: list[tuple[int, float]], final: list[float], frames: int = BUDGET,
         eval_seed: int = 12345) -> None:
    """A finished run: its training curve (metrics/run.csv) and its cached final eval."""
    run.mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"env_steps": frames, "finished": True}))
    sink = MetricsSink(run, tensorboard=False)
    for step, value in points:
        sink.log("run", step, {"win": value, "episodes": 100})
    sink.close()
    seed = int(run.name.rpartition("seed")[2])
    records = [{"win": w, "team_return": 1.0} for w in final]
    (run / "evidence_eval.json").write_text(json.dumps({
        "key": {"episodes": len(final), "seed": eval_seed + seed, "env_steps": frames}, "records": records,
        "goals": {"low": {"all": [10, 4]}}}))


def test_the_summary_by_hand(tmp_path):
    plan = TransferPlan(name="t", outcome="win", source=Task("grid"), target=Task("grid", ["size=9"]),
                        steps=BUDGET, skill_steps=1000, pretrain_steps=4000, flat=["layers=1"],
                        flat_shaped=["layers=1", "ent_coef=0.05"], hier=["layers=2"], then="high", seeds=[0, 1],
                        eval_episodes=2, out=tmp_path, rate=True)
    for seed in (0, 1):
        # the from-scratch flat teams: `flat` ends at 0.6 in both seeds (its eval 0.5 beats flat_shaped's 0.25)
        _run(plan.run_dir(FLAT, seed), [(1000, 0.2), (5000, 0.6), (BUDGET, 0.6)], [0.5, 0.5])
        _run(plan.run_dir(SHAPED, seed), [(1000, 0.1), (BUDGET, 0.9)], [0.0, 0.5])
        _run(plan.run_dir(SKILLS, seed), [], [0.0, 0.0], frames=1000)
        _run(plan.run_dir(PRETRAIN, seed), [], [0.0, 0.0], frames=4000)
    # the transfer arm reaches 0.6 at 2000 (seed 0) and 3000 (seed 1): 0.2 and 0.3 of the budget
    _run(plan.run_dir(TRANSFER, 0), [(1000, 0.3), (2000, 0.7), (BUDGET, 0.8)], [1.0, 1.0])
    _run(plan.run_dir(TRANSFER, 1), [(1000, 0.5), (3000, 0.6), (BUDGET, 0.7)], [1.0, 0.0])
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
    f = arms[FINETUNED]["to_threshold"]
    assert f["steps"] == [1000, None] and f["fraction"]["verdict"] == "does not meet"
    assert f["counted"]["per_seed"] == [pytest.approx(0.5), None]       # (4000 + 1000) / 10000
    assert arms[TRANSFER]["source_frames"] == [1000, 1000] and arms[FINETUNED]["source_frames"] == [4000, 4000]
    assert arms[TRANSFER]["goal_success"]["low"]["per_seed"] == [0.4, 0.4]
    assert "counted" not in arms[FLAT]["to_threshold"]
