"""The evidence protocol end to end on grid, at a budget of seconds: three arms, a skills stage in the
hierarchy's budget, the final evals, the diagnostics, the report and its PNG; finished runs and
evals reused; runs of another budget refused; the report rewritten from its data file alone once the
run folders are gone, and a data-file record the code would no longer make refused."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

import examples.studies.protocol as protocol
from examples.studies.evidence import finished
from examples.studies.protocol import ARMS, FLAT, FLAT_ARMS, HIER, SHAPED, ProtocolPlan, SkillStage, main, read_records
from hdppo.stats import diff_ci, t_ci

STEPS, SKILLS = 2048, 512


def _plan(out):
    # epochs=2: the protocol's plumbing does not need the default's 16 passes (most of the runs' CPU)
    return ProtocolPlan("grid", "success", STEPS, flat=["layers=1"], flat_shaped=["layers=1", "ent_coef=0.05"],
                        hier=["layers=2"], skills=SkillStage(SKILLS, then="high"), seeds=[0, 1],
                        common=["workers=1", "backend=inline", "envs_per_worker=8", "log_every=0", "epochs=2"],
                        eval_episodes=8, out=out, name="grid-protocol", rate=True,
                        notes=["An earlier design of this hierarchy did worse."])


@pytest.mark.long(70)
def test_the_protocol_on_grid(tmp_path, monkeypatch):
    out, docs = tmp_path / "runs", tmp_path / "docs"
    plan = _plan(out)
    summary = main(plan, "examples/evidence/grid.py", ["--write", str(docs)])
    arms = summary["arms"]
    for seed in plan.seeds:                  # every run trained its share of the budget
        skill = json.loads((plan.skill_dir(seed) / "state.json").read_text())["env_steps"]
        assert skill >= SKILLS and finished(plan.run_dir(HIER, seed), STEPS - skill)
        cmd = arms[HIER]["commands"][2 * plan.seeds.index(seed) + 1]
        assert f"--steps {STEPS - skill} " in cmd and f"--load low={plan.skill_dir(seed)}" in cmd
        assert "--layer high" in cmd
        for arm in FLAT_ARMS:
            assert finished(plan.run_dir(arm, seed), STEPS)
    assert all(f >= STEPS for arm in ARMS for f in arms[arm]["frames"])
    for arm in ARMS:                         # the statistics are what hdppo.stats gives for the per-seed means
        s = arms[arm]
        assert len(s["per_seed"]) == 2 and all(0.0 <= x <= 1.0 for x in s["per_seed"])
        m, lo, hi = t_ci(s["per_seed"])             # success is a rate: its interval clipped to [0, 1]
        assert s["ci"] == pytest.approx((m, max(lo, 0.0), min(hi, 1.0)), nan_ok=True)
        assert all(m is not None and m > 0 for m in s["minutes"])
    best = summary["better_flat"]
    assert arms[best]["ci"][0] == max(arms[a]["ci"][0] for a in FLAT_ARMS)
    assert summary["diff"] == pytest.approx(diff_ci(arms[HIER]["per_seed"], arms[best]["per_seed"]), nan_ok=True)
    assert summary["verdict"] == ("stands" if summary["diff"][1] > 0 else "does not stand")
    why = summary["why"]
    assert why["top"] == "high" and why["n_goals"] == 4 and why["entropy"]["uniform"] == pytest.approx(np.log(4))
    assert "low" in why["goal_success"] and why["goal_success"]["low"]["goals"][0] > 0
    assert all(0.0 <= x <= 1.0 for x in why["random_top"]["per_seed"])
    assert all((plan.run_dir(HIER, s) / "evidence_eval-uniform-high.json").is_file() for s in plan.seeds)

    text = (docs / "grid-protocol.md").read_text()
    assert "Reproduce with `python examples/evidence/grid.py --write" in text
    assert f"**Verdict: the claim {'stands' if summary['verdict'] == 'stands' else 'does not stand'}.**" in text
    assert f"The better flat arm is **{best}**" in text and "(the better flat arm)" in text
    assert "goal success of `low`" in text and "entropy of the commander `high`" in text
    assert "`hdppo eval --uniform high`" in text and "trained minus random commander" in text
    assert f"{SKILLS} frames of `hdppo train --skills`" in text
    for arm in ARMS:
        assert f"| **{arm}**" in text
    assert "## Notes\n\nAn earlier design of this hierarchy did worse.\n\nRuns (exact commands):" in text
    assert (docs / "grid-protocol.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    stamp = (plan.run_dir(HIER, 0) / "state.json").stat().st_mtime_ns
    monkeypatch.setattr("hdppo.runtime.evaluate.play", lambda *a, **k: pytest.fail("played again"))
    again = main(plan, "x", ["--report-only"])                   # nothing trained or played again
    assert again["arms"][HIER]["per_seed"] == arms[HIER]["per_seed"]
    assert (plan.run_dir(HIER, 0) / "state.json").stat().st_mtime_ns == stamp
    with pytest.raises(SystemExit, match="another budget"):
        main(plan, "x", ["--steps", str(2 * STEPS)])

    # the data file beside the report: with the run folders gone, the same report from it alone, nothing trained
    data = docs / "grid-protocol-runs.json"
    assert sorted(read_records(data)) == sorted((arm, s) for arm in ARMS for s in plan.seeds)
    shutil.rmtree(out)
    monkeypatch.setattr("examples.studies.protocol.train_run", lambda *a, **k: pytest.fail("trained again"))
    kept = main(plan, "examples/evidence/grid.py", ["--write", str(docs)])
    for key in ("diff", "verdict", "better_flat", "threshold", "why"):
        assert kept[key] == pytest.approx(summary[key], nan_ok=True) if key in ("diff", "threshold") \
            else json.dumps(kept[key]) == json.dumps(summary[key])
    for arm in ARMS:
        assert kept["arms"][arm]["per_seed"] == arms[arm]["per_seed"]
        assert kept["arms"][arm]["curve"] == pytest.approx(arms[arm]["curve"], nan_ok=True)

    def body(md: str) -> list[str]:            # the report but its own provenance line
        return [line for line in md.splitlines() if not line.startswith("- report:")]
    assert body((docs / "grid-protocol.md").read_text()) == body(text)
    records = json.loads(data.read_text())     # a record made with settings the code no longer gives is refused
    records[0]["configs"][0]["train"]["layers"]["low"]["epochs"] = 3
    data.write_text(json.dumps(records))
    with pytest.raises(SystemExit, match="data file were made with settings"):
        main(plan, "x", ["--report-only", "--write", str(docs)])


@pytest.mark.long(25)
def test_a_campaign_cut_off_keeps_the_seeds_it_finished_in_its_data_file(tmp_path, monkeypatch):
    out, docs = tmp_path / "runs", tmp_path / "docs"
    plan = dataclasses.replace(_plan(out), seeds=[0], skills=None)
    real = protocol.train_run

    def cut(run, *args, **kw):               # the session ends while the hierarchy trains
        if run == plan.run_dir(HIER, 0):
            raise KeyboardInterrupt
        real(run, *args, **kw)
    monkeypatch.setattr(protocol, "train_run", cut)
    with pytest.raises(KeyboardInterrupt):
        main(plan, "x", ["--write", str(docs)])
    data = read_records(docs / "grid-protocol-runs.json")
    assert sorted(data) == [(FLAT, 0), (SHAPED, 0)]
    with pytest.raises(SystemExit, match="no seed of \\[0\\] has all three arms"):
        main(plan, "x", ["--report-only", "--write", str(docs)])

    shutil.rmtree(out)                       # the next session's machine: the run folders are gone
    trained = []

    def count(run, *args, **kw):
        trained.append(run)
        real(run, *args, **kw)
    monkeypatch.setattr(protocol, "train_run", count)
    summary = main(plan, "x", ["--write", str(docs)])
    assert trained == [plan.run_dir(HIER, 0)]                 # only what the cut-off campaign had not finished
    for arm in FLAT_ARMS:
        assert summary["arms"][arm]["per_seed"] == [data[arm, 0]["final"]]
    assert sorted(read_records(docs / "grid-protocol-runs.json")) == sorted((arm, 0) for arm in ARMS)

    # a report of what is done while seed 1 is not: seed 0's, seed 1 named as pending
    part = main(plan, "x", ["--report-only", "--seeds", "0", "1", "--write", str(docs)])
    assert part["pending"] == [1] and part["arms"][HIER]["per_seed"] == summary["arms"][HIER]["per_seed"]
    text = (docs / "grid-protocol.md").read_text()
    assert "**Incomplete**: seeds [1] of this command are not finished; this report covers seeds [0]" in text
    assert "(6 training runs; finished ones are reused)" in text
