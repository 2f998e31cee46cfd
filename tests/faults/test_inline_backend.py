"""The inline backend's errors, timeouts and signals behave as the process backend's: an env
exception is one line naming the worker, the call and the line that raised it (on both backends:
no traceback unless --debug); a hung step is named within worker_timeout; a SIGTERM while a step
hangs commits and exits 143, and the run then resumes to its end.

On the code before: inline printed a raw traceback and exited 1 (process: exit 2, but the worker's
traceback inside the message); a hung inline step waited forever, and so did its first SIGTERM."""
from __future__ import annotations

import itertools
import os
import signal
import time

import pytest

from hdppo.engine.commit import list_commits
from tests.faults.runs import error_lines, finish
from tests.helpers import TESTS
from tests.helpers.faults import column, launch, wait_for

FAILING_ENV = TESTS / "fixtures" / "failing_env.py"
COMMON = ["--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=2", "rollout=8"]


@pytest.mark.parametrize("backend", ["inline", "process"])
def test_an_env_exception_is_one_line_naming_worker_call_and_line(backend, tmp_path):
    log = tmp_path / "train.log"
    proc = launch(["train", FAILING_ENV, "fail=raise", "at=5", "--steps", "200", "--backend", backend, *COMMON,
                   "--out", tmp_path / "run"], log)
    rc = finish(proc, 240, log)
    text = log.read_text()
    assert rc == 2, text
    assert "Traceback" not in text
    [line] = error_lines(text)
    assert "worker 0 failed in collect: RuntimeError: boom on env step 5 (raised at " in line, line
    assert f"{FAILING_ENV}:" in line and "in _fail" in line, line
    assert "--debug" in text                                   # the fix line says how to see the traceback


def test_debug_shows_the_worker_traceback(tmp_path):
    log = tmp_path / "train.log"
    proc = launch(["--debug", "train", FAILING_ENV, "fail=raise", "at=5", "--steps", "200", "--backend", "inline",
                   *COMMON, "--out", tmp_path / "run"], log)
    assert finish(proc, 240, log) != 0
    text = log.read_text()
    assert "Traceback" in text and "boom on env step 5" in text and "failing_env.py" in text, text


def test_a_hung_inline_step_is_named_within_worker_timeout_and_resumes(tmp_path):
    run, log, marker = tmp_path / "run", tmp_path / "train.log", tmp_path / "marker"
    proc = launch(["train", FAILING_ENV, "fail=hang", "at=20", f"marker={marker}", "worker_timeout=3", "--steps", "400",
                   "--backend", "inline", *COMMON, "checkpoint_every=1", "--out", run], log)
    wait_for(marker.exists, 240, "the hang", proc)
    t0 = time.monotonic()
    rc = finish(proc, 120, log)
    text = log.read_text()
    assert rc == 2, text
    assert time.monotonic() - t0 < 3 + 30, text
    assert "Traceback" not in text
    [line] = error_lines(text)
    assert "worker 0 (inline, pid" in line and "gave no answer to collect within 3 s (worker_timeout)" in line, line
    assert f"hung at {FAILING_ENV}:" in line, line             # where the step hung
    assert list_commits(run)[-1] >= 1                          # the last round boundary was committed
    resume = launch(["train", "--resume", run], tmp_path / "resume.log")   # the marker exists: no copy hangs now
    assert finish(resume, 240, tmp_path / "resume.log") == 0, (tmp_path / "resume.log").read_text()
    steps = column(run, "low", "step")
    assert steps and all(a < b for a, b in itertools.pairwise(steps))


def test_sigterm_while_an_inline_step_hangs_commits_and_exits_143(tmp_path):
    run, log, marker = tmp_path / "run", tmp_path / "train.log", tmp_path / "marker"
    proc = launch(["train", FAILING_ENV, "fail=hang", "at=20", f"marker={marker}", "worker_timeout=600",
                   "--steps", "400", "--backend", "inline", *COMMON, "checkpoint_every=1000", "--out", run], log)
    wait_for(marker.exists, 240, "the hang", proc)
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    rc = finish(proc, 60, log)
    text = log.read_text()
    assert rc == 143, text
    assert time.monotonic() - t0 < 30
    assert "Traceback" not in text
    assert "stopped by SIGTERM" in text and f"--resume {run}" in text, text
    assert list_commits(run)[-1] >= 1                          # the stop's own commit (checkpoint_every is high)
    resume = launch(["train", "--resume", run], tmp_path / "resume.log")
    assert finish(resume, 240, tmp_path / "resume.log") == 0, (tmp_path / "resume.log").read_text()
    steps = column(run, "low", "step")
    assert steps and all(a < b for a, b in itertools.pairwise(steps))
