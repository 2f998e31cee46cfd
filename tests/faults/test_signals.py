"""SIGTERM and SIGHUP commit and exit 128+signal with the resume line; a SIGSTOPped worker is named
within worker_timeout; each run then resumes to the end with nothing lost (process backend)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from hdppo.cli import main
from hdppo.engine.commit import list_commits, open_commit
from tests.helpers.faults import GRID, assert_consistent, launch, wait_for

STEPS = 3000
RUN = [*GRID, "--backend", "process", "--workers", "2", "--steps", STEPS]


def started(log: Path) -> bool:
    return (log.parent / "run" / "metrics" / "low.csv").is_file()


SLOW_HIGH = [*(a for a in RUN if not str(a).startswith("high.rollout")), "high.rollout=400"]


@pytest.mark.parametrize("sig,group,args", [(signal.SIGTERM, False, RUN), (signal.SIGHUP, False, SLOW_HIGH),
                                            (signal.SIGINT, True, RUN)],
                         ids=["SIGTERM", "SIGHUP-before-high-updates", "SIGINT-to-the-group"])
def test_stop_signal_commits_then_exits(sig, group, args, tmp_path, capsys):
    """SIGINT goes to the whole process group, workers included, as Ctrl-C in a terminal does. With
    SLOW_HIGH the signal comes before the high layer's first update (it has no metrics CSV yet)."""
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *args, "--out", run], log)
    wait_for(lambda: started(log), 120, "the first update", proc)
    time.sleep(0.5)
    t0 = time.monotonic()
    (os.killpg if group else os.kill)(proc.pid, sig)
    rc = proc.wait(timeout=60)
    text = log.read_text()
    assert rc == 128 + sig, text
    assert time.monotonic() - t0 < 30
    assert f"stopped by {signal.Signals(sig).name}" in text and f"--resume {run}" in text, text
    c = open_commit(run, list_commits(run)[-1])
    assert c.number >= 1 and c.layers == ["high", "low", "mid"]
    # the commit is the state at the stop: the last row of every layer CSV is at the commit's env step or before
    # and nothing after it needs cutting. A slow layer (high updates once per 256 env steps) may not have
    # written its first row by the signal: then it has no CSV and the commit counts no rows for it.
    from tests.helpers.faults import column
    steps = {n: column(run, n, "step") if (run / "metrics" / f"{n}.csv").exists() else [] for n in c.layers}
    assert steps["low"], "the signal came after low's first update"
    for layer, at in steps.items():
        assert not at or at[-1] <= c.env_steps, layer
        assert c.manifest["metrics_rows"].get(f"{layer}.csv", 0) == len(at), layer
    assert not any(p.is_alive() for p in psutil.process_iter() if p.pid == proc.pid)
    assert main(["train", "--resume", str(run)]) == 0
    assert_consistent(run)


@pytest.mark.long(35)
def test_a_stopped_worker_is_named_within_the_timeout(tmp_path, capsys):
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *RUN, "worker_timeout=4", "--out", run], log)
    wait_for(lambda: started(log), 120, "the first update", proc)
    workers = [c for c in psutil.Process(proc.pid).children()
               if "resource_tracker" not in " ".join(c.cmdline())]
    assert len(workers) == 2
    victim = workers[1]
    victim.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        rc = proc.wait(timeout=60)
    finally:
        if victim.is_running():
            victim.send_signal(signal.SIGKILL)
    took = time.monotonic() - t0
    text = log.read_text()
    assert rc == 2, text
    assert f"pid {victim.pid}" in text and "stopped" in text and "worker_timeout" in text, text
    assert "Traceback" not in text
    assert took < 4 + 15, took                  # the deadline (4 s) plus closing the pool
    if "no answer to collect" in text:          # hung between rounds: that round boundary was committed
        from tests.helpers.faults import column
        c = open_commit(run, list_commits(run)[-1])
        on_disk = {n: len(column(run, n, "step")) if (run / "metrics" / f"{n}.csv").exists() else 0
                   for n in ("low", "mid", "high")}
        assert c.number >= 1 and on_disk["low"] > 0
        assert all(c.manifest["metrics_rows"].get(f"{n}.csv", 0) == rows for n, rows in on_disk.items())
    assert main(["train", "--resume", str(run)]) == 0
    assert_consistent(run)
