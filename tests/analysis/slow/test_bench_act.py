"""`hdppo bench --act` at a tiny size: every runtime and mode is timed over the same recorded
skirmish steps, torch and ONNX agree on every greedy action, the table states the targets."""
from __future__ import annotations

import re

import pytest

from hdppo.analysis import bench_act
from hdppo.analysis.bench_act import ActBenchConfig
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("bench-act") / "run", "skirmish")


def test_every_row_is_timed_over_the_same_steps(run):
    cfg = ActBenchConfig(run=str(run), steps=60, repeats=2)
    r = bench_act.run_act_bench(cfg, log=lambda m: None)
    assert set(r["rows"]) == {(rt, mode) for rt in ("torch", "onnx") for mode in ("greedy", "sampled")}
    for row in r["rows"].values():
        assert 0 < row["median"] <= row["p95"] and 0 < row["cpu_median"] <= row["cpu_p95"]
    assert r["steps"] == 60 and r["episodes"] >= 1 and r["mismatches"] == 0
    text = bench_act.markdown(r, cfg, "hdppo bench --act")
    assert re.search(r"\| torch \| greedy \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| 2\.0 \|", text)
    assert re.search(r"\| onnx \| sampled \| .* \| 1\.0 \|", text) and "differ on 0 of " in text


def test_the_cli_trains_a_short_run_when_given_none(capsys, tmp_path):
    rc, out, err = cli(capsys, "bench", "--act", "train_steps=256", "steps=30", "repeats=1",
                       "--write", tmp_path / "act.md")
    assert rc == 0, err
    assert "training a 256-step skirmish run" in out and "| onnx | greedy |" in out
    assert "Command: `hdppo bench --act train_steps=256 steps=30 repeats=1" in (tmp_path / "act.md").read_text()
    rc, _, err = cli(capsys, "bench", "--act", "workers=2")
    assert rc == 2 and "workers" in err                         # the throughput bench's keys are not the act bench's
