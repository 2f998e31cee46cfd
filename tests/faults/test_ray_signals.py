"""The Ray backend under stop signals: SIGTERM commits, prints the resume line and exits 143 as on
the process backend, and a driver that started its own local Ray leaves none of Ray's processes
behind, whether it is stopped or SIGKILLed.

On the code before: SIGTERM hit Ray's own handler (`*** SIGTERM received ***`, exit -6, no commit,
no resume line), and after a SIGKILL `ray::DashboardAgent` and `ray::RuntimeEnvAgent` kept running."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from hdppo.engine.commit import list_commits
from tests.faults.runs import finish
from tests.helpers.faults import GRID, assert_consistent, launch, wait_for

pytestmark = pytest.mark.ray         # a fault test (slow, by its folder) that starts a local Ray

RUN = [*GRID, "--backend", "ray", "--workers", "2", "--steps", "3000"]


def started(run: Path) -> bool:
    return (run / "metrics" / "low.csv").is_file()


def below(pid: int) -> list[psutil.Process]:
    """Every process under the driver: Ray's (GCS, raylet, agents, workers) and hdppo's reaper."""
    return psutil.Process(pid).children(recursive=True)


def running(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {p.name()}")
        except psutil.Error:
            pass
    return out


def cleanup(procs: list[psutil.Process]) -> None:
    """Whatever a failed test left running is killed, so the next test starts clean."""
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def test_sigterm_commits_exits_143_and_leaves_no_ray_process(tmp_path):
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *RUN, "--out", run], log)
    wait_for(lambda: started(run), 300, "the first update", proc)
    ray_procs = below(proc.pid)
    assert any(p.name() == "raylet" for p in ray_procs)
    try:
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        rc = finish(proc, 120, log)
        text = log.read_text()
        assert rc == 143, text
        assert time.monotonic() - t0 < 60
        assert "SIGTERM received" not in text and "Traceback" not in text, text
        assert "stopped by SIGTERM" in text and f"--resume {run}" in text, text
        assert list_commits(run)[-1] >= 1
        wait_for(lambda: not running(ray_procs), 60, f"Ray's processes to end: {running(ray_procs)}")
    finally:
        cleanup(ray_procs)
    resume = launch(["train", "--resume", run], tmp_path / "resume.log")
    assert finish(resume, 400, tmp_path / "resume.log") == 0, (tmp_path / "resume.log").read_text()
    assert_consistent(run)


def test_a_killed_driver_leaves_no_ray_process(tmp_path):
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *RUN, "--out", run], log)
    wait_for(lambda: started(run), 300, "the first update", proc)
    ray_procs = below(proc.pid)
    names = {p.name() for p in ray_procs}
    assert {"raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(lambda: not running(ray_procs), 60, "Ray's processes to end after the driver's SIGKILL")
    except AssertionError:
        raise AssertionError(f"still running 60 s after the SIGKILL: {running(ray_procs)}") from None
    finally:
        cleanup(ray_procs)
