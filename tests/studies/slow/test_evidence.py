"""Evidence runs: the curve maths, and one tiny end-to-end plan on grid (train, eval, report, PNG)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from examples.studies.evidence import EvidencePlan, Variant, finished, main, mean_curve, outcome_curve, steps_to_reach
from hdppo.engine.metrics import MetricsSink


def _fake_run(path: Path, steps: list[int], wins: list[float], episodes: list[int]) -> Path:
    sink = MetricsSink(path, tensorboard=False)
    for s, w, n in zip(steps, wins, episodes):
        sink.log("run", s, {"win": w, "episodes": n})
    sink.close()
    (path / "state.json").write_text(json.dumps({"env_steps": steps[-1], "finished": True}))
    return path


def test_steps_to_reach_first_crossing_or_none():
    grid = np.array([0.0, 10.0, 20.0, 30.0])
    curve = np.array([np.nan, 0.2, 0.6, 0.5])
    assert steps_to_reach(grid, curve, 0.5) == 20.0
    assert steps_to_reach(grid, curve, 0.2) == 10.0
    assert steps_to_reach(grid, curve, 0.7) is None


def test_outcome_curve_drops_thin_windows_and_mean_curve_averages_seeds(tmp_path):
    a = _fake_run(tmp_path / "a", [100, 200, 300, 400], [0.9, 0.0, 0.5, 1.0], [10, 60, 100, 200])
    b = _fake_run(tmp_path / "b", [200, 400], [0.2, 0.6], [80, 200])
    x, y = outcome_curve(a, "win")
    assert x.tolist() == [200, 300, 400] and y.tolist() == [0.0, 0.5, 1.0]   # 10 episodes is too few
    grid = np.array([100.0, 200.0, 300.0, 400.0])
    m = mean_curve([a, b], "win", grid)
    assert np.isnan(m[0])                          # before either seed's first counted point
    np.testing.assert_allclose(m[1:], [(0.0 + 0.2) / 2, (0.5 + 0.4) / 2, (1.0 + 0.6) / 2])


@pytest.mark.long(50)
def test_tiny_plan_on_grid_writes_report_png_and_reuses_finished_runs(tmp_path, monkeypatch):
    out = tmp_path / "ev"
    # epochs=2: the report's plumbing does not need the default's 16 passes (most of the runs' CPU)
    plan = EvidencePlan("grid", "success", 1500, [0], [Variant("3-layer", ["layers=3"]), Variant("flat", ["layers=1"])],
                        common=["workers=1", "envs_per_worker=8", "log_every=0", "epochs=2"], eval_episodes=8, out=out)
    summary = main(plan, "examples/evidence/grid.py", ["--write", str(tmp_path / "docs"), "--variant", "two=layers=2"])
    assert list(summary["variants"]) == ["3-layer", "two", "flat"]      # extra designs sit before the baseline
    for label in ("3-layer", "two", "flat"):
        run = out / f"{label}-seed0"
        assert finished(run, 1500)
        v = summary["variants"][label]
        assert len(v["eval_per_seed"]) == 1 and 0.0 <= v["eval"][0] <= 1.0
        assert v["eval"][1] <= v["eval"][0] <= v["eval"][2]
        assert f"--out {run}" in v["commands"][0]
    text = (tmp_path / "docs" / "grid.md").read_text()
    docs = tmp_path / "docs"
    assert f"Reproduce with `python examples/evidence/grid.py --write {docs} --variant two=layers=2`" in text
    assert "3-layer (`layers=3`)" in text and "flat (`layers=1`)" in text and "![success curves](grid.png)" in text
    assert "env steps** with `workers=1 envs_per_worker=8 log_every=0 epochs=2`;" in text    # every run's settings
    timed = json.loads((out / "timings.json").read_text())
    flat_row = next(line for line in text.splitlines() if line.startswith("| flat ("))
    assert flat_row.split("|")[-2].strip() == f"{timed['flat-seed0'] / 60:.1f}"   # each design's own cost per run
    png = (tmp_path / "docs" / "grid.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    stamp = (out / "flat-seed0" / "state.json").stat().st_mtime_ns
    import hdppo.runtime.evaluate
    monkeypatch.setattr(hdppo.runtime.evaluate, "play", lambda *a, **k: pytest.fail("played again"))
    again = main(plan, "x", ["--report-only", "--variant", "two=layers=2"])   # nothing retrained or replayed
    assert list(again["variants"]) == ["3-layer", "two", "flat"] and len(plan.variants) == 2
    assert (out / "flat-seed0" / "state.json").stat().st_mtime_ns == stamp


def test_a_flat_team_that_never_improved_sets_no_target(tmp_path, monkeypatch):
    import examples.studies.evidence as ev
    runs = {"3-layer": _fake_run(tmp_path / "h", [100, 200], [0.0, 0.0], [60, 60]),
            "flat": _fake_run(tmp_path / "f", [100, 200], [0.0, 0.0], [60, 60])}
    plan = EvidencePlan("grid", "win", 200, [0], [Variant("3-layer", []), Variant("flat", [])], out=tmp_path)
    monkeypatch.setattr(plan, "run_dir", lambda variant, seed: runs[variant.label])
    monkeypatch.setattr("hdppo.runtime.evaluate.play", lambda run, n, seed: [{"win": 0.0, "team_return": 1.0}] * n)
    summary = ev.summarize(plan)
    assert summary["flat_improved"] is False and summary["hier_steps_to_target"] is None
    text = ev.markdown(plan, summary, "x.png", "python x.py")
    assert "no target" in text
    assert text.count(" | - |\n") == 2            # runs not timed here (no timings.json) show no training minutes


def test_steps_to_target_per_seed_with_an_interval_across_the_seeds_that_reached_it(tmp_path):
    from examples.studies.evidence import seed_steps_to_target
    grid = np.linspace(0, 1000, 11)
    runs = []
    for i, reach_at in enumerate([300, 500, None]):        # seed curves that step up to 1.0 at these steps
        run = tmp_path / f"r{i}"
        sink = MetricsSink(run)
        for step in range(0, 1001, 100):
            win = 1.0 if reach_at is not None and step >= reach_at else 0.2
            sink.log("run", step, {"win": win, "episodes": 50})
        sink.close()
        runs.append(run)
    got = seed_steps_to_target(runs, "win", grid, 0.9)
    assert got["per_seed"] == [300.0, 500.0, None] and got["reached"] == 2
    m, lo, hi = got["ci"]
    assert m == pytest.approx(400.0) and lo < 300 and hi > 500      # t interval with 1 dof is wide


def test_minutes_per_run_are_the_median_of_the_designs_own_timed_runs(tmp_path):
    from examples.studies.evidence import variant_minutes
    plan = EvidencePlan("grid", "win", 100, [0, 1, 2], [Variant("flat", [])], out=tmp_path)
    runs = [plan.run_dir(plan.variants[0], s) for s in plan.seeds]
    assert variant_minutes(plan, runs) is None                            # nothing timed here
    (tmp_path / "timings.json").write_text(json.dumps({"flat-seed0": 120.0, "flat-seed1": 600.0,
                                                       "flat-seed2": 180.0, "other-seed0": 6000.0}))
    assert variant_minutes(plan, runs) == pytest.approx(3.0)               # one slowed run does not move it
