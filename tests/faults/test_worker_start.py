"""A worker whose env hangs in its constructor is named within worker_timeout (inline and process
backends), and process workers die quietly with a SIGKILLed driver.

On the code before: the start timeout was a fixed 300 s on the process backend (none at all on
inline), and workers of a driver killed with results unread printed `ConnectionResetError`
tracebacks on the terminal."""
from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests.faults.runs import error_lines, finish
from tests.helpers import TESTS
from tests.helpers.faults import GRID, launch, wait_for

FAILING_ENV = TESTS / "fixtures" / "failing_env.py"


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_an_env_hanging_in_its_constructor_is_named_within_worker_timeout(backend, tmp_path):
    run, log, marker = tmp_path / "run", tmp_path / "train.log", tmp_path / "marker"
    proc = launch(["train", FAILING_ENV, "fail=hang", "at=0", f"marker={marker}", "worker_timeout=3", "--steps", "200",
                   "--backend", backend, "--workers", "2", "--seed", "0", "--no-progress", "envs_per_worker=2",
                   "--out", run], log)
    wait_for(marker.exists, 240, "a worker's env to hang in its constructor", proc)
    t0 = time.monotonic()
    rc = finish(proc, 120, log)                # far below the old fixed 300 s
    text = log.read_text()
    assert rc == 2, text
    assert time.monotonic() - t0 < 3 + 30, text
    assert "Traceback" not in text
    [line] = error_lines(text)
    assert "did not build its envs within 3 s (worker_timeout)" in line, line
    pid = int(marker.read_text())
    assert f"pid {pid}" in line, line          # the hung worker (inline: this process) by its pid
    assert "raise worker_timeout" in text
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_workers_die_quietly_with_a_killed_driver(tmp_path):
    """The driver is stopped (SIGSTOP) so the workers' answers sit unread in its pipes, then SIGKILLed:
    the case in which workers used to die with a ConnectionResetError traceback."""
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *GRID, "--backend", "process", "--workers", "2", "--steps", "30000", "--out", run], log)
    wait_for(lambda: (run / "metrics" / "low.csv").is_file(), 240, "the first update", proc)
    workers = [c for c in psutil.Process(proc.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
    assert len(workers) == 2
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(2.0)                            # the workers finish their calls and answer into the stopped driver
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    gone = lambda: all(not w.is_running() or w.status() == psutil.STATUS_ZOMBIE for w in workers)  # noqa: E731
    wait_for(gone, 30, "the workers to end with their driver")
    time.sleep(1.0)                            # anything they would print is in the log by now
    text = log.read_text()
    assert "Traceback" not in text and "ConnectionResetError" not in text and "BrokenPipeError" not in text, text
