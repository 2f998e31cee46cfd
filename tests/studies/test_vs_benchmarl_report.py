"""The side-by-side report of examples/benchmarks/vs_benchmarl.py, written from made-up finished runs:
its budget label, the per-arm difference to MAPPO and the verdict against the issue's target."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def vs():
    import examples.benchmarks.vs_benchmarl as module
    return module


def runs(arm: str, finals: list[float], wall: float) -> list[dict]:
    return [{"arm": arm, "task": "simple_spread", "seed": seed, "frames": 150_000, "final_return": f,
             "process_wall_s": wall, "wall_s": wall - 5, "train_curve": [(0, f - 1.0), (150_000, f)],
             "eval_curve": [(150_000, f)]} for seed, f in enumerate(finals)]


def write(vs, tmp_path: Path, frames: int, seeds: int) -> str:
    results = {"simple_spread": {"benchmarl_mappo": runs("benchmarl_mappo", [1.0, 2.0, 3.0], 400.0),
                                 "hdppo_flat": runs("hdppo_flat", [2.5, 3.0, 3.5], 80.0),
                                 "hdppo_flat_decentralized": runs("hdppo_flat_decentralized", [1.5, 1.6, 1.7], 100.0),
                                 "hdppo_squads": runs("hdppo_squads", [-5.0, -5.1, -4.9], 50.0)}}
    args = argparse.Namespace(frames=frames, seed_list=list(range(seeds)), benchmarl_threads=1, hdppo_set=[],
                              page="external")
    return vs.report(results, args, tmp_path, "python examples/benchmarks/vs_benchmarl.py", None).read_text()


def row(text: str, arm: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {arm} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_each_arm_gets_its_difference_to_mappo_and_a_verdict(vs, tmp_path):
    text = write(vs, tmp_path, 150_000, 3)
    assert row(text, "hdppo_flat")[4].startswith("1.000 [") and row(text, "hdppo_flat")[5] == "above"
    assert row(text, "hdppo_flat_decentralized")[5] == "inside"       # mean 1.6 < 2.0, above MAPPO's low end
    assert row(text, "hdppo_squads")[5] == "below"
    assert row(text, "benchmarl_mappo")[4:6] == ["-", "-"]
    assert row(text, "hdppo_flat")[6] == "2.000 -> 3.000"              # each seed's curve rises by 1.0
    assert row(text, "hdppo_flat")[10] == "5.00x"                     # 400 s / 80 s
    assert (tmp_path / "simple_spread.png").is_file()


def test_a_report_of_non_default_hdppo_settings_says_so(vs, tmp_path):
    results = {"navigation": {"hdppo_flat": runs("hdppo_flat", [0.5, 0.6, 0.7], 80.0)}}
    args = argparse.Namespace(frames=150_000, seed_list=[0, 1, 2], benchmarl_threads=1, hdppo_set=["epochs=16"],
                              page="external")
    text = vs.report(results, args, tmp_path, "python vs_benchmarl.py --hdppo-set epochs=16", None).read_text()
    assert "**not its defaults**: `epochs=16`" in text
    assert "not its defaults" not in write(vs, tmp_path, 150_000, 3)


@pytest.mark.parametrize(("frames", "seeds", "label"), [(12_000, 1, "Smoke run"), (150_000, 2, "Smoke run"),
                                                        (150_000, 3, "Reduced budget"), (1_002_000, 3, None)])
def test_the_budget_label_says_what_the_report_is(vs, tmp_path, frames, seeds, label):
    head = write(vs, tmp_path, frames, seeds).splitlines()[0]
    if label is None:
        assert head == "# hdppo vs BenchMARL on VMAS"
    else:
        assert head.startswith(f"> **{label}")


def test_finished_runs_are_reused_only_for_the_same_budget_and_settings(vs, tmp_path, monkeypatch):
    trained = []

    def fake_run(task, arm, seed, frames, folder, extra):
        trained.append((seed, frames, tuple(extra)))
        r = runs(arm, [0.5], 10.0)[0]
        (folder / "result.json").write_text(json.dumps({**r, "frames": frames}))

    monkeypatch.setattr(vs, "run_hdppo", fake_run)
    monkeypatch.setattr(vs, "changed_since", lambda *args: [])          # made-up runs: nothing changed since
    base = ["--seeds", "3", "--tasks", "navigation", "--arms", "hdppo_flat", "--runs", str(tmp_path / "runs"),
            "--write", str(tmp_path / "out")]
    vs.main(["--frames", "60000", *base])
    vs.main(["--frames", "60000", *base])                                  # all three reused
    vs.main(["--frames", "60000", "--hdppo-set", "epochs=16", *base])     # another setting: trained again
    vs.main(["--frames", "120000", "--hdppo-set", "epochs=16", *base])    # another budget: trained again
    assert trained == [(s, 60_000, ()) for s in range(3)] + [(s, 60_000, ("epochs=16",)) for s in range(3)] \
        + [(s, 120_000, ("epochs=16",)) for s in range(3)]
    assert "**not its defaults**: `epochs=16`" in (tmp_path / "out" / "external.md").read_text()
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        vs.main(["--hdppo-set", "epochs", *base])


def test_the_summary_counts_each_arms_targets_over_the_tasks(vs, tmp_path):
    results = {"navigation": {"benchmarl_mappo": runs("benchmarl_mappo", [0.8, 0.9, 1.0], 600.0),
                              "hdppo_flat": runs("hdppo_flat", [0.5, 0.6, 0.7], 100.0)},      # below, 6x
               "balance": {"benchmarl_mappo": runs("benchmarl_mappo", [1.0, 2.0, 3.0], 400.0),
                           "benchmarl_ippo": runs("benchmarl_ippo", [0.0, 0.5, 1.0], 300.0),
                           "hdppo_flat": runs("hdppo_flat", [2.5, 3.0, 3.5], 100.0)},         # above, 4x
               "transport": {"hdppo_flat": runs("hdppo_flat", [0.1, 0.2, 0.3], 50.0)}}        # no MAPPO run
    args = argparse.Namespace(frames=150_000, seed_list=[0, 1, 2], benchmarl_threads=1, hdppo_set=[], page="external")
    text = vs.report(results, args, tmp_path, "python vs_benchmarl.py", None).read_text()
    summary = text[text.index("## Summary"):text.index("## navigation")]
    assert "| navigation | hdppo_flat | -0.300 [" in summary and "| below | 6.00x |" in summary
    assert "| balance | hdppo_flat | 1.000 [" in summary and "| above | 4.00x |" in summary
    assert "| transport | hdppo_flat | - | - | - |" in summary
    assert "- `hdppo_flat`: return target on 1 of 2 tasks (not on navigation); wall-clock target on 1 of 2." \
        in summary
    assert "| hdppo_flat | 150,000 |" in text[text.index("## navigation"):]        # the per-task tables follow
    assert "benchmarl_ippo" not in summary                        # the targets are hdppo's, not BenchMARL IPPO's
    assert row(text, "benchmarl_ippo")[5] == "below"               # IPPO is still compared with MAPPO, per task


@pytest.mark.parametrize(("arm", "settings"), [("hdppo_flat", []), ("hdppo_flat_decentralized", ["centralized=false"]),
                                               ("hdppo_flat_epochs4", ["epochs=4"])])
def test_each_hdppo_arm_trains_with_its_own_settings(vs, tmp_path, monkeypatch, arm, settings):
    commands = []

    def stop(cmd, log=None, env=None):
        commands.append(cmd)
        raise RuntimeError("stop after the train command")

    monkeypatch.setattr(vs, "sh", stop)
    with pytest.raises(RuntimeError):
        vs.run_hdppo("navigation", arm, 0, 12_000, tmp_path, ["lr=1e-4"])
    cmd = commands[0]
    assert cmd[cmd.index("train") + 1] == "vmas_navigation" and cmd[-1] == "lr=1e-4"
    assert [a for a in cmd if a in ("centralized=false", "epochs=4")] == settings
    assert {a for a in vs.ARMS if a.startswith("hdppo")} == set(vs.HDPPO_ARGS)


def test_a_run_that_logged_late_starts_its_training_curve_at_its_first_point(vs):
    early = {"train_curve": [(5_000, -1.0), (10_000, -0.5), (100_000, 0.0), (145_000, 1.0)]}
    late = {"train_curve": [(16_384, -2.0), (40_000, 0.0), (150_000, 2.0)]}     # first row after 10% of 150k
    assert vs.start_end([early], 150_000) == (-0.75, 1.0)
    assert vs.start_end([late], 150_000) == (-2.0, 2.0)
    assert vs.start_end([early, late], 150_000) == (-1.375, 1.5)


def test_report_only_trains_nothing_and_lists_the_missing_runs(vs, tmp_path, monkeypatch):
    def fake_run(task, arm, seed, frames, folder, extra):
        (folder / "result.json").write_text(json.dumps({**runs(arm, [0.5], 10.0)[0], "frames": frames}))

    monkeypatch.setattr(vs, "run_hdppo", fake_run)
    monkeypatch.setattr(vs, "changed_since", lambda *args: [])
    where = ["--frames", "60000", "--tasks", "navigation", "--runs", str(tmp_path / "runs"),
             "--write", str(tmp_path / "out")]
    vs.main(["--seeds", "2", "--arms", "hdppo_flat", *where])              # seeds 0 and 1 finished

    def no_training(*args):
        raise AssertionError("--report-only trained a run")

    monkeypatch.setattr(vs, "run_hdppo", no_training)
    monkeypatch.setattr(vs, "run_benchmarl", no_training)
    vs.main(["--seeds", "3", "--arms", "hdppo_flat", "--report-only", *where])
    text = (tmp_path / "out" / "external.md").read_text()
    assert "**Incomplete**: 1 run(s) of the command below are missing and not in the tables: " \
        "navigation/hdppo_flat/seed_2." in text
    assert row(text, "hdppo_flat")[2] == "0.500, 0.500"                      # the two finished seeds
    assert "--report-only" not in text                                     # the command given trains them all

    monkeypatch.setattr(vs, "ensure_benchmarl", lambda: pytest.fail("--report-only made BenchMARL's venv"))
    monkeypatch.setattr(vs, "BENCHMARL_VENV", tmp_path / "no-venv")
    vs.main(["--seeds", "3", "--arms", "benchmarl_mappo,hdppo_flat", "--report-only", *where])
    assert "**Incomplete**: 4 run(s)" in (tmp_path / "out" / "external.md").read_text()


def test_a_finished_run_that_its_command_would_no_longer_make_is_trained_again(vs, tmp_path, monkeypatch):
    trained = []

    def fake_run(task, arm, seed, frames, folder, extra):
        trained.append(seed)
        (folder / "result.json").write_text(json.dumps({**runs(arm, [0.5], 10.0)[0], "frames": frames}))

    monkeypatch.setattr(vs, "run_hdppo", fake_run)
    base = ["--frames", "60000", "--seeds", "2", "--tasks", "navigation", "--arms", "hdppo_flat",
            "--runs", str(tmp_path / "runs"), "--write", str(tmp_path / "out")]
    monkeypatch.setattr(vs, "changed_since", lambda *args: [])
    vs.main(base)
    # a default changed since seed 1 ran (as hdppo's epochs did, 4 -> 16): same budget and settings asked
    changed = ["train.layers.low.epochs: 4 in the run, 16 now"]
    monkeypatch.setattr(vs, "changed_since", lambda task, arm, seed, *rest: changed if seed == 1 else [])
    vs.main([*base, "--report-only"])
    assert "navigation/hdppo_flat/seed_1 (made with other settings)" in (tmp_path / "out" / "external.md").read_text()
    vs.main(base)
    assert trained == [0, 1, 1]


def test_changed_since_compares_the_real_run_folder_with_the_arms_command(vs, tmp_path, monkeypatch):
    seen = []
    import examples.studies.same_run as same_run
    monkeypatch.setattr(same_run, "changed_settings", lambda run, argv: seen.append((run, argv)) or ["x"])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")          # a real run folder: its config is what is read
    assert vs.changed_since("navigation", "hdppo_flat_epochs4", 2, 60_000, tmp_path, ["lr=1e-4"]) == ["x"]
    run, argv = seen[0]
    assert run == tmp_path / "run" and argv[0] == "vmas_navigation"
    assert argv[argv.index("--seed") + 1] == "2" and "epochs=4" in argv and argv[-1] == "lr=1e-4"
    assert vs.changed_since("navigation", "benchmarl_mappo", 0, 60_000, tmp_path, []) == [] and len(seen) == 1


def test_another_vmas_task_runs_at_benchmarls_task_parameters_on_both_sides(vs, tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    conf = venv / "lib" / "python3.11" / "site-packages" / "benchmarl" / "conf" / "task" / "vmas"
    conf.mkdir(parents=True)
    (conf / "wheel.yaml").write_text("defaults:\n  - vmas_wheel_config\n  - _self_\n\nmax_steps: 100\nn_agents: 3\n"
                                     "line_length: 1\nline_mass: 30\ndesired_velocity: 0.05\n")
    monkeypatch.setattr(vs, "BENCHMARL_VENV", venv)
    monkeypatch.setattr(vs, "OTHER_TASKS", {})
    scenario, n_agents, fixed = vs.task_spec("wheel", tmp_path / "runs")
    assert (n_agents, fixed) == (3, {})                       # counted from the env the YAML makes, not assumed
    text = (tmp_path / "runs" / "wheel" / "vmas_wheel.py").read_text()
    assert scenario == str(tmp_path / "runs" / "wheel" / "vmas_wheel.py")
    assert "'n_agents': 3" in text and "'line_mass': 30" in text and "defaults" not in text
    assert vs.hdppo_command("wheel", "hdppo_flat", 0, 6000, tmp_path / "runs" / "wheel" / "hdppo_flat" / "seed_0",
                            [])[2] == scenario
    assert vs.arms_for("wheel", ["hdppo_flat", "hdppo_squads"], tmp_path / "runs") == ["hdppo_flat"]  # 3 agents
    with pytest.raises(SystemExit, match=r"unknown task 'whel'.*wheel"):
        vs.task_spec("whel", tmp_path / "runs")


def test_the_data_file_keeps_every_run_and_a_later_call_reuses_them(vs, tmp_path, monkeypatch, capsys):
    write(vs, tmp_path, 150_000, 3)
    known = vs.known_records(tmp_path / "external-runs.json")
    assert len(known) == 12 and known[("simple_spread", "hdppo_flat", 1)]["final_return"] == 3.0
    # a call that finds these records (no run folders) trains nothing for the BenchMARL arm and reports them
    records = [dict(r, frames_asked=150_000, hdppo_set=[]) for r in runs("benchmarl_mappo", [1.0, 2.0, 3.0], 400.0)]
    (tmp_path / "other-runs.json").write_text(json.dumps(records))
    monkeypatch.setattr(vs, "ensure_benchmarl", lambda: tmp_path / "no-venv" / "python")
    monkeypatch.setattr(vs, "versions", lambda python: {})
    monkeypatch.setattr(vs, "run_benchmarl", lambda *a: pytest.fail("a kept record was trained again"))
    vs.main(["--frames", "150000", "--seeds", "3", "--tasks", "simple_spread", "--arms", "benchmarl_mappo",
             "--runs", str(tmp_path / "runs"), "--write", str(tmp_path), "--page", "other"])
    assert capsys.readouterr().out.count("reuse ") == 3
    assert "![simple_spread](other-simple_spread.png)" in (tmp_path / "other.md").read_text()
    assert (tmp_path / "other-simple_spread.png").is_file()


def test_a_kept_hdppo_record_without_its_folder_is_checked_against_the_config_it_kept(vs, tmp_path):
    folder = tmp_path / "runs" / "balance" / "hdppo_flat" / "seed_0"
    assert vs.changed_since("balance", "hdppo_flat", 0, 6000, folder, [], {}) == [
        "the run's settings (no run folder, and the record kept no config)"]
    from examples.studies.same_run import resolved_config
    argv = vs.hdppo_command("balance", "hdppo_flat", 0, 6000, folder, [])[2:]
    kept = resolved_config(argv)
    assert vs.changed_since("balance", "hdppo_flat", 0, 6000, folder, [], {"config": kept}) == []
    kept["train"]["layers"]["low"]["epochs"] = 3
    assert vs.changed_since("balance", "hdppo_flat", 0, 6000, folder, [], {"config": kept})[0].startswith(
        "train.layers.low.epochs: 3 in the run")


def test_a_call_on_fewer_arms_keeps_the_data_files_other_runs_and_trains_seed_0_of_each_first(vs, tmp_path,
                                                                                             monkeypatch):
    order = []

    def fake_run(task, arm, seed, frames, folder, extra):
        order.append((task, seed))
        (folder / "result.json").write_text(json.dumps({**runs(arm, [0.5], 10.0)[0], "task": task, "seed": seed,
                                                        "frames": frames}))

    kept = [dict(r, frames_asked=60_000, hdppo_set=[]) for r in runs("benchmarl_mappo", [1.0], 400.0)]
    (tmp_path / "external-runs.json").write_text(json.dumps(kept))      # another call's finished MAPPO run
    monkeypatch.setattr(vs, "run_hdppo", fake_run)
    monkeypatch.setattr(vs, "changed_since", lambda *args: [])
    vs.main(["--frames", "60000", "--seeds", "2", "--tasks", "navigation,balance", "--arms", "hdppo_flat",
             "--runs", str(tmp_path / "runs"), "--write", str(tmp_path)])
    assert order == [("navigation", 0), ("balance", 0), ("navigation", 1), ("balance", 1)]
    known = vs.known_records(tmp_path / "external-runs.json")
    assert known[("simple_spread", "benchmarl_mappo", 0)]["final_return"] == 1.0      # not dropped
    assert {k for k in known if k[1] == "hdppo_flat"} == {(t, "hdppo_flat", s) for t in ("navigation", "balance")
                                                          for s in (0, 1)}
