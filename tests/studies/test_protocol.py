"""The evidence protocol's statistics against values worked out by hand, and its budget accounting
with a skills stage (examples.studies.protocol); the end-to-end run is in slow/test_protocol_grid.py."""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from examples.studies.protocol import (
    EVAL_SEED,
    FLAT,
    HIER,
    SHAPED,
    ProtocolPlan,
    SkillStage,
    _ci,
    _seeds_df,
    _steps_ci,
    arm_commands,
    better_flat,
    check_budget,
    check_runs,
    configure,
    frames,
    from_records,
    late_entropy,
    markdown,
    paired_ci,
    reach_ci,
    read_records,
    seed_points,
    seeds_t_ci,
    stale_records,
    summarize,
    thin,
    verdict,
    verdict_head,
    write_records,
)
from hdppo.engine.metrics import MetricsSink
from hdppo.stats import diff_ci, t_ci

HIER_FINALS = [0.6, 0.8, 0.7, 0.9, 1.0]      # mean 0.8, sample variance 0.1 / 4 = 0.025
FLAT_FINALS = [0.2, 0.4, 0.3, 0.5, 0.6]      # mean 0.4, the same variance


def test_student_t_interval_of_five_seeds_by_hand():
    # half width = t(0.975, 4) * sqrt(0.025 / 5) = 2.776445 * 0.0707107 = 0.196324
    m, lo, hi = t_ci(HIER_FINALS)
    assert (m, lo, hi) == pytest.approx((0.8, 0.603676, 0.996324), abs=1e-6)


def test_a_rates_interval_is_clipped_to_0_1():
    # [0, 0.375]: mean 0.1875, sd 0.265165, se 0.1875, t(0.975, 1) = 12.706205 -> half 2.382413
    assert seeds_t_ci([0.0, 0.375]) == pytest.approx((0.1875, -2.194913, 2.569913), abs=1e-6)
    assert seeds_t_ci([0.0, 0.375], rate=True) == pytest.approx((0.1875, 0.0, 1.0))


def test_one_seed_has_no_interval_in_the_report():
    # t_ci gives one value zero width ([0.03, 0.03]), which a report would print as a certain interval
    m, lo, hi = seeds_t_ci([0.03], rate=True)
    assert m == 0.03 and np.isnan(lo) and np.isnan(hi)
    assert _ci(seeds_t_ci([0.03])) == "0.030" and _ci(paired_ci([0.5], [0.25])) == "0.250"
    assert _ci(seeds_t_ci([0.03, float("nan")])) == "0.030"               # one finite seed of two


def test_the_report_counts_seeds_and_degrees_of_freedom_in_words():
    # a partial report of one seed said "1 seeds"
    assert _seeds_df(1) == "1 seed, 0 degrees of freedom"
    assert _seeds_df(2) == "2 seeds, 1 degree of freedom"
    assert _seeds_df(5) == "5 seeds, 4 degrees of freedom"


def test_welch_difference_and_the_verdict_by_hand():
    # se = sqrt(0.025/5 + 0.025/5) = 0.1; Welch dof = 0.01^2 / (2 * 0.005^2 / 4) = 8; t(0.975, 8) = 2.306004
    d = diff_ci(HIER_FINALS, FLAT_FINALS)
    assert d == pytest.approx((0.4, 0.169400, 0.630600), abs=1e-6)
    assert verdict(d) == "stands"
    assert verdict(diff_ci(HIER_FINALS, [x + 0.3 for x in FLAT_FINALS])) == "does not stand"   # (0.1, -0.13, 0.33)
    assert verdict(diff_ci([0.5], FLAT_FINALS)) == "not judged"                             # one seed: no interval
    assert verdict((0.0, 0.0, 0.0)) == "does not stand"          # equal, no spread: not above 0


def test_the_better_flat_arm_is_the_one_with_the_higher_mean():
    assert better_flat({FLAT: FLAT_FINALS, SHAPED: [0.1, 0.9, 0.5, 0.5, 0.5]}) == SHAPED     # 0.5 > 0.4
    assert better_flat({FLAT: FLAT_FINALS, SHAPED: [0.0, 0.0, 0.0, 0.0, 2.0]}) == FLAT       # 0.4 = 0.4: plain
    assert better_flat({FLAT: [1.0, 1.0], SHAPED: [0.0, 0.5]}) == FLAT


def test_steps_to_threshold_interval_over_the_seeds_that_reached_it():
    # [300, 500]: mean 400, sd 141.421, se 100, t(0.975, 1) = 12.706205
    got = reach_ci([300.0, None, 500.0])
    assert got["reached"] == 2 and got["per_seed"] == [300.0, None, 500.0]
    assert got["ci"] == pytest.approx((400.0, 400.0 - 1270.6205, 400.0 + 1270.6205), abs=1e-3)
    one = reach_ci([None, 700.0])
    assert one["reached"] == 1 and one["ci"][0] == 700.0 and np.isnan(one["ci"][1])
    assert reach_ci([None, None])["reached"] == 0


def test_steps_intervals_print_thousands_on_both_sides_of_zero():
    """Two seeds far apart give a lower bound below zero: it reads in thousands like the rest."""
    assert _steps_ci((467_000.0, -3_422_397.0, 4_356_000.0)) == "467k [-3,422k, 4,356k]"
    assert _steps_ci((8_000.0, 5_000.0, 9_500.0)) == "8,000 [5,000, 9,500]"
    assert _steps_ci((171_000.0, float("nan"), float("nan"))) == "171k (one seed: no interval)"


def test_random_commander_difference_is_paired_by_seed():
    # differences 0.1, 0.3, 0.2: mean 0.2, sd 0.1, t(0.975, 2) = 4.302653 -> half 0.248414
    assert paired_ci([0.5, 0.7, 0.9], [0.4, 0.4, 0.7]) == pytest.approx((0.2, -0.048414, 0.448414), abs=1e-6)


def _plan(tmp_path: Path, skills: int | None = 1000) -> ProtocolPlan:
    return ProtocolPlan("grid", "success", 4000, ["layers=1"], ["layers=1", "ent_coef=0.05"], ["layers=2"],
                        skills=SkillStage(skills) if skills else None, seeds=[0], out=tmp_path, common=["workers=1"])


def _state(run: Path, env_steps: int) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "state.json").write_text(json.dumps({"env_steps": env_steps, "finished": True}))


def test_the_skill_runs_frames_count_in_the_hierarchys_budget(tmp_path):
    plan = _plan(tmp_path)
    flat, hier = plan.command(FLAT, 0), plan.command(HIER, 0)
    assert flat[flat.index("--steps") + 1] == "4000" and flat[flat.index("--layer") + 1] == "all"
    assert hier[hier.index("--steps") + 1] == "3000"                     # before the skill run: its budget
    assert hier[hier.index("--layer") + 1] == "high" and f"low={tmp_path / 'hier-skills-seed0'}" in hier
    skill = plan.skill_command(0)
    assert "--skills" in skill and skill[skill.index("--steps") + 1] == "1000" and "layers=2" in skill
    assert [job[0].name for job in plan.jobs(0)] == ["flat-seed0", "flat_shaped-seed0", "hier-skills-seed0",
                                                     "hier-seed0"]
    _state(plan.skill_dir(0), 1024)                                     # it ended on a whole rollout
    assert plan.arm_steps(HIER, 0) == 2976 and plan.command(HIER, 0)[4] == "2976"
    _state(plan.run_dir(HIER, 0), 2976)
    _state(plan.run_dir(FLAT, 0), 4096)
    assert frames(plan, HIER, 0) == 4000 and frames(plan, FLAT, 0) == 4096
    without = _plan(tmp_path / "none", skills=None)
    assert without.arm_steps(HIER, 0) == 4000 and "--load" not in without.command(HIER, 0)
    with pytest.raises(ValueError, match="fewer than"):
        _plan(tmp_path, skills=4000)


def test_a_skill_layer_is_trained_on_when_the_hierarchys_run_names_it_or_all():
    assert not SkillStage(10).trains_skills                                  # then="high": frozen
    assert SkillStage(10, then="all").trains_skills and SkillStage(10, then="high,low").trains_skills
    assert not SkillStage(10, then="high,mid").trains_skills


def test_runs_of_another_budget_are_refused(tmp_path):
    plan = _plan(tmp_path)
    check_budget(plan, write=True)
    check_budget(plan, write=False)                                      # the same budget: fine
    other = _plan(tmp_path, skills=2000)
    with pytest.raises(SystemExit, match="another budget"):
        check_budget(other, write=False)


def test_command_line_settings_replace_the_plans_own(tmp_path):
    plan = _plan(tmp_path)
    args = argparse.Namespace(steps=8000, skill_steps=500, seeds=[3, 4], out=str(tmp_path / "x"), episodes=7,
                              threshold=0.5, set=["workers=2", "backend=inline"])
    got = configure(plan, args)
    assert got.common == ["workers=2", "backend=inline"] and got.skills is not None and got.skills.steps == 500
    assert (got.steps, got.seeds, got.eval_episodes, got.threshold) == (8000, [3, 4], 7, 0.5)
    assert plan.steps == 4000 and plan.common == ["workers=1"]           # the given plan is unchanged
    assert configure(plan, argparse.Namespace(**{**vars(args), "skill_steps": 0})).skills is None


def test_skill_steps_are_refused_for_a_plan_without_a_skill_stage(tmp_path):
    plan = dataclasses.replace(_plan(tmp_path), skills=None)
    args = argparse.Namespace(steps=8000, skill_steps=500, seeds=[0], out=str(tmp_path), episodes=7,
                              threshold=None, set=[])
    with pytest.raises(SystemExit, match=r"no skill stage.*drop --skill-steps"):
        configure(plan, args)
    assert configure(plan, argparse.Namespace(**{**vars(args), "skill_steps": 0})).skills is None


def _curve(run: Path, points: list[tuple[int, float]], extra: dict | None = None, scope: str = "run") -> None:
    sink = MetricsSink(run, tensorboard=False)
    for step, value in points:
        sink.log(scope, step, {"success": value, "episodes": 100, **(extra or {})} if scope == "run"
                 else {"entropy": value})
    sink.close()


def test_the_hierarchys_curve_runs_from_its_skill_run_on(tmp_path):
    plan = _plan(tmp_path)
    _curve(plan.skill_dir(0), [(500, 0.1), (1000, 0.2)])
    _state(plan.skill_dir(0), 1000)
    _curve(plan.run_dir(HIER, 0), [(1000, 0.5), (3000, 0.9)])
    x, y = seed_points(plan, HIER, 0, "success")
    assert x.tolist() == [500, 1000, 2000, 4000] and y.tolist() == [0.1, 0.2, 0.5, 0.9]


def test_late_entropy_is_the_mean_of_the_last_tenth_of_the_steps(tmp_path):
    run = tmp_path / "r"
    _curve(run, [(100, 1.4), (500, 1.2), (905, 0.9), (1000, 0.7)], scope="high")
    assert late_entropy(run, "high") == pytest.approx(0.8)              # steps >= 900: 0.9 and 0.7
    assert np.isnan(late_entropy(run, "mid"))


def test_a_records_curve_is_thinned_evenly_keeping_its_ends():
    x = np.arange(1000.0)
    tx, ty = thin(x, 2 * x, n=100)
    assert len(tx) == 100 and tx[0] == 0 and tx[-1] == 999 and np.all(np.diff(tx) > 0) and (ty == 2 * tx).all()
    short = np.arange(5.0)
    assert thin(short, short, n=100)[0] is short                        # short curves are kept whole


def _record(plan: ProtocolPlan, arm: str, seed: int, final: float = 0.5) -> dict:
    from examples.studies.same_run import resolved_config
    configs = [resolved_config(cmd[2:]) for cmd in arm_commands(plan, arm, seed)]
    return {"arm": arm, "seed": seed, "budget": plan.budget(), "eval_episodes": plan.eval_episodes,
            "eval_seed": EVAL_SEED + seed, "commands": [], "configs": configs, "provenance": [None], "frames": 4000,
            "minutes": 1.0, "curve": [[], []], "final": final, "team_return": 0.0, "also": {}, "goals": {}}


def test_a_data_file_record_stands_in_for_a_run_only_while_it_fits_and_the_run_is_not_finished(tmp_path):
    plan = _plan(tmp_path)
    known = {(FLAT, 0): _record(plan, FLAT, 0)}
    assert list(from_records(plan, known)) == [(FLAT, 0)]
    for change in ({"budget": {"steps": 8000, "skill_steps": 1000}}, {"eval_episodes": 7}, {"eval_seed": 1},
                   {"seed": 1}):
        assert not from_records(plan, {(FLAT, 0): {**known[FLAT, 0], **change}})
    assert not from_records(dataclasses.replace(plan, also=["lifts"]), known)     # a key the record lacks
    _state(plan.run_dir(FLAT, 0), 4000)                                # the run is here, finished: it is read
    assert not from_records(plan, known)


def test_a_report_of_part_of_its_seeds_gives_its_verdict_as_so_far(tmp_path, monkeypatch):
    """The 5m_vs_6m page on seeds 0-1 of 5 said "Verdict: the claim does not stand." as if final, its
    figure too, whose axis spoke of a skill run that plan does not have."""
    import examples.studies.protocol as protocol
    plan = dataclasses.replace(_plan(tmp_path, skills=None), seeds=[0, 1])
    finals = {FLAT: [0.0, 0.1], SHAPED: [0.96, 0.89], HIER: [0.06, 0.05]}
    known = {(arm, s): {**_record(plan, arm, s, final=finals[arm][s]), "curve": [[0, 4000], [0.0, finals[arm][s]]]}
             for arm in finals for s in plan.seeds}
    for s in plan.seeds:                               # the hierarchy's record carries its commander's diagnostics
        known[HIER, s].update(top="high", n_goals=6, random_top=0.02, entropy=0.43)
    summary = summarize(plan, known=known)
    assert summary["verdict"] == "does not stand" and summary["better_flat"] == SHAPED
    partial = markdown(plan, {**summary, "pending": [2, 3, 4]}, "x.png", "python x.py")
    assert "**Verdict so far (2 of 5 seeds): the claim does not stand.**" in partial
    assert "**Verdict:" not in partial and "> **Incomplete**: seeds [2, 3, 4]" in partial
    whole = markdown(plan, {**summary, "pending": []}, "x.png", "python x.py")
    assert "**Verdict: the claim does not stand.**" in whole and "so far" not in whole
    assert verdict_head([0], [1, 2]) == "Verdict so far (1 of 3 seeds)" and verdict_head([0, 1], []) == "Verdict"
    figures = []
    monkeypatch.setattr(protocol, "save_png", lambda fig, png: figures.append(fig))
    protocol.plot(plan, {**summary, "pending": [2, 3, 4]}, tmp_path / "x.png")
    curves, bars = figures[0].axes
    assert bars.get_title() == "verdict so far (2 of 5 seeds): does not stand"
    assert curves.get_xlabel() == "env frames"                        # no skill run in this plan to include
    import matplotlib.pyplot as plt
    plt.close(figures[0])                                             # save_png, stubbed here, closes it


def test_a_record_made_with_other_settings_is_refused_naming_them(tmp_path):
    plan = _plan(tmp_path)
    known = {(FLAT, 0): _record(plan, FLAT, 0), (HIER, 0): _record(plan, HIER, 0)}
    assert stale_records(plan, known) == {}
    known[FLAT, 0]["configs"][0]["train"]["layers"]["low"]["epochs"] = 4     # as if a default changed since
    assert stale_records(plan, known) == {"flat seed 0": ["train.layers.low.epochs: 4 in the run, 16 now"]}
    skill_run = known[HIER, 0]["configs"][0]["scenario_config"]         # the skill run's config is compared too
    size = skill_run["size"]
    skill_run["size"] = size + 1
    assert stale_records(plan, known)["hier seed 0"] == [f"scenario_config.size: {size + 1} in the run, {size} now"]
    with pytest.raises(SystemExit, match=r"(?s)data file.*flat seed 0: train.layers.low.epochs.*fix: take"):
        check_runs(plan, known=known)


def test_the_data_file_keeps_the_records_of_seeds_a_report_did_not_cover(tmp_path):
    plan = _plan(tmp_path)
    path = tmp_path / "docs" / "x-runs.json"
    old = {(FLAT, 0): _record(plan, FLAT, 0, final=0.1), (FLAT, 3): _record(plan, FLAT, 3, final=0.3)}
    write_records(path, [_record(plan, FLAT, 0, final=0.9), _record(plan, HIER, 0)], old)
    got = read_records(path)
    assert sorted(got) == [(FLAT, 0), (FLAT, 3), (HIER, 0)]
    assert got[FLAT, 0]["final"] == 0.9 and got[FLAT, 3]["final"] == 0.3      # the new record replaces the old
    assert read_records(tmp_path / "none.json") == {}


def test_arms_trains_only_those_arms_and_reports_once_a_seed_has_all_three(tmp_path, monkeypatch):
    """--arms: a session trains a share of a long campaign (e.g. the hierarchy's seeds), each arm's
    seed kept in the data file; no report until a seed has all three arms, then --report-only's, whose
    reproduce command is the whole campaign's (no --arms)."""
    import examples.studies.protocol as protocol
    plan = dataclasses.replace(_plan(tmp_path / "runs"), seeds=[0, 1])
    docs = tmp_path / "docs"
    trained, reports = [], []
    monkeypatch.setattr(protocol, "train_run", lambda run, *a, **kw: trained.append(run.name))
    monkeypatch.setattr(protocol, "run_record", lambda p, arm, seed: _record(p, arm, seed))
    monkeypatch.setattr(protocol, "campaign", lambda p, args, command, *a, **kw: reports.append((args, command)))

    got = protocol.main(plan, "x.py", ["--arms", "hier", "--write", str(docs)])
    assert trained == ["hier-skills-seed0", "hier-seed0", "hier-skills-seed1", "hier-seed1"]
    assert got["pending"] == [0, 1] and not reports                   # no seed is whole: no report
    assert sorted(read_records(docs / "grid-runs.json")) == [(HIER, 0), (HIER, 1)]

    trained.clear()
    protocol.main(plan, "x.py", ["--arms", "flat", "flat_shaped", "--seeds", "0", "--write", str(docs)])
    assert trained == ["flat-seed0", "flat_shaped-seed0"]             # the hierarchy's records stand in for it
    (args, command), = reports
    assert args.report_only and command == f"python x.py --seeds 0 --write {docs}"
    with pytest.raises(ValueError, match="skills"):
        protocol.train_all(plan, arms=["skills"])


def test_the_reproduce_command_drops_what_picks_a_sessions_share():
    from examples.studies.protocol import reproduce
    assert reproduce("s.py", ["--arms", "hier", "flat", "--seeds", "0", "1", "--report-only", "--arms=hier",
                              "--tag", "x"]) == "python s.py --seeds 0 1 --tag x"
