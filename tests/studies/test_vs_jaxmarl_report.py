"""The SMAX side-by-side report of examples/benchmarks/vs_jaxmarl.py, written from made-up finished
runs: Student-t win intervals across seeds, the difference to MAPPO, wall-clock ratios, the kept
hand-written section, and the data file whose records a later call reuses only while an hdppo
record's settings are what its command makes."""
from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from hdppo.cli import main as cli_main
from hdppo.engine.config import LayerConfig
from hdppo.runfolder import load_run_config


@pytest.fixture(scope="module")
def vs():
    import examples.benchmarks.vs_jaxmarl as module
    return module


def records(arm: str, wins: list[float], wall: float) -> list[dict]:
    framework = arm.split("_")[0]
    return [{"framework": framework, "arm": arm, "map": "3m", "seed": s, "frames": 100_000, "frames_asked": 98_304,
             "win_sampled": w, "win_greedy": min(1.0, w + 0.1), "eval_episodes": 100, "process_wall_s": wall,
             "curve": [(50_000, w / 2, 0.5), (100_000, w, 1.0)], "load_before": 1.0, "load_after": 2.0,
             "jaxmarl_commit": "c793d09561aa", "versions": {"jaxmarl": "0.2.0"}} for s, w in enumerate(wins)]


def write(vs, out: Path, missing: list[str] | None = None) -> str:
    results = {"3m": {"jaxmarl_mappo": records("jaxmarl_mappo", [0.4, 0.5, 0.6], 600.0),
                      "hdppo_flat": records("hdppo_flat", [0.7, 0.8, 0.9], 300.0)}}
    args = argparse.Namespace(frames=98_304, seed_list=[0, 1, 2])
    return vs.report(results, args, out, "python examples/benchmarks/vs_jaxmarl.py", missing or []).read_text()


def row(text: str, arm: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {arm} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_each_arm_gets_a_student_t_interval_its_difference_to_mappo_and_the_wall_clock_ratio(vs, tmp_path):
    text = write(vs, tmp_path)
    # mean 0.8, sd 0.1, n 3: t(0.975, 2) = 4.303, half width 4.303 * 0.1 / sqrt(3) = 0.248
    assert row(text, "hdppo_flat")[3] == "0.80 [0.55, 1.05]"
    assert row(text, "hdppo_flat")[5] == "+0.30 [+0.07, +0.53]"       # Welch, equal spreads: df 4, t 2.776
    assert row(text, "jaxmarl_mappo")[5] == "-"
    assert row(text, "hdppo_flat")[8] == "2.00x"                      # 600 s / 300 s
    assert row(text, "hdppo_flat")[9] == "1.5"                        # load average over the run
    assert "Per seed (sampled): jaxmarl_mappo: 0.40, 0.50, 0.60; hdppo_flat: 0.70, 0.80, 0.90." in text
    assert (tmp_path / "smax-jaxmarl-3m.png").is_file() and "![3m](smax-jaxmarl-3m.png)" in text


def test_the_runs_not_yet_finished_are_named_in_words_that_fit_their_number(vs, tmp_path):
    assert "Incomplete" not in write(vs, tmp_path)
    one = write(vs, tmp_path, ["3m/hdppo_hier/seed_2"])
    assert "> **Incomplete**: 1 run of this command is not finished: 3m/hdppo_hier/seed_2." in one
    two = write(vs, tmp_path, ["3m/hdppo_hier/seed_1", "3m/hdppo_hier/seed_2"])
    assert "> **Incomplete**: 2 runs of this command are not finished: 3m/hdppo_hier/seed_1, " \
           "3m/hdppo_hier/seed_2." in two


def test_the_hand_written_section_survives_a_regeneration_and_the_records_are_kept(vs, tmp_path):
    write(vs, tmp_path)
    page = tmp_path / "smax.md"
    hand = f"{vs.KEEP_MARK}\n\n## What this shows\n\nA note with a heading.\n\n{vs.KEEP_END}\n"
    page.write_text(page.read_text() + "\n" + hand)
    text = write(vs, tmp_path)
    assert text.count("A note with a heading.") == 1 and text.count(vs.KEEP_MARK) == 1
    known = vs.known_records(tmp_path / vs.DATA_FILE)
    assert set(known) == {("3m", "jaxmarl_mappo", s) for s in range(3)} | {("3m", "hdppo_flat", s) for s in range(3)}
    assert known[("3m", "hdppo_flat", 1)]["win_sampled"] == 0.8


def test_a_report_of_fewer_maps_keeps_the_data_files_other_records(vs, tmp_path):
    write(vs, tmp_path)                                                    # 3m's six records
    other = {"2s3z": {"hdppo_flat": [dict(r, map="2s3z") for r in records("hdppo_flat", [0.3], 300.0)]}}
    vs.report(other, argparse.Namespace(frames=98_304, seed_list=[0]), tmp_path, "python x.py", [])
    known = vs.known_records(tmp_path / vs.DATA_FILE)
    assert ("2s3z", "hdppo_flat", 0) in known and len(known) == 7
    assert known[("3m", "jaxmarl_mappo", 2)]["win_sampled"] == 0.6


ARGS = ["grid", "--steps", "512", "--seed", "0", "--no-progress", "layers=1", "workers=1", "backend=inline",
        "envs_per_worker=4", "rollout=16", "minibatches=1", "log_every=0"]


def test_a_kept_hdppo_record_is_redone_when_its_command_no_longer_makes_it(vs, tmp_path):
    run = tmp_path / "run"
    assert cli_main(["train", *ARGS, "--out", str(run), "epochs=2"]) == 0
    config = {k: v for k, v in load_run_config(run).items() if k in vs.SETTINGS}
    record = {"framework": "hdppo", "config": config,
              "command": shlex.join(["hdppo", "train", *ARGS, "--out", str(run), "epochs=2"])}
    assert vs.changed(record) == []
    json.dumps(record)                                               # a record is plain JSON
    record["command"] = shlex.join(["hdppo", "train", *ARGS, "--out", str(run)])  # today's default epochs
    assert vs.changed(record) == [f"train.layers.low.epochs: 2 in the run, {LayerConfig().epochs} now"]
    assert vs.changed({"framework": "jaxmarl"}) == []


def test_the_jaxmarl_arms_without_a_clone_stop_with_how_to_get_one(vs, tmp_path):
    with pytest.raises(SystemExit, match=re.escape("git clone https://github.com/FLAIROx/JaxMARL")):
        vs.check_repo(None)
    with pytest.raises(SystemExit, match=re.escape("no baselines/IPPO/ippo_rnn_smax.py")):
        vs.check_repo(str(tmp_path))
