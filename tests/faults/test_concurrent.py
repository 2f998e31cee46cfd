"""One writer per run folder (issue 25, item 1): a second `hdppo train --resume R` beside a live
run of R, or beside another resume after a SIGKILL, is refused in one line naming the holder's pid;
the live run loses nothing; readers keep working; the lock goes however its holder ends (a lock file
left by a SIGKILLed run never blocks).

Before the lock, the resume beside a live run trained too (or crashed with a raw OSError at a
commit rename), cut the live run's CSVs, and two resumes after a kill both trained."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hdppo.engine.commit import list_commits
from tests.helpers.cli import cli
from tests.helpers.faults import GRID, assert_consistent, column, launch, wait_for

LONG = [*GRID, "--backend", "inline", "--workers", "1", "--steps", "200000", "checkpoint_every=2"]
LOCK = ".lock"


def lock_is_free(run: Path) -> bool:
    """Whether a writer could lock `run` now (flock on a new open file: also within this process)."""
    with open(run / LOCK, "a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return True


def assert_refused_by(text: str, rc: int | None, holder_pid: int) -> None:
    assert rc == 2, text
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("hdppo: error:")]
    assert len(errors) == 1, text
    assert f"pid {holder_pid}" in errors[0] and "being written by another hdppo process" in errors[0], text
    assert any(line.strip().startswith("fix:") for line in text.splitlines()), text


def assert_no_update_lost(run: Path) -> None:
    """Every layer CSV: one row per update, at evenly spaced env steps from the first (sync mode, one
    worker), versions strictly increasing; every CSV's steps strictly increasing."""
    assert_consistent(run)
    for layer in ("low", "mid", "high"):
        steps = column(run, layer, "step")
        assert steps, layer
        assert steps == [steps[0] * (k + 1) for k in range(len(steps))], f"{layer}: rows lost or repeated"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_resume_beside_a_live_run_is_refused_and_the_run_loses_nothing(tmp_path):
    run = tmp_path / "run"
    live = launch(["train", *LONG, "--out", run], tmp_path / "live.log")
    second = None
    try:
        wait_for(lambda: len(list_commits(run)) >= 3, 180, "three commits", live)
        second = launch(["train", "--resume", run], tmp_path / "second.log")
        try:
            rc = second.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail("the second writer trained beside the live run instead of being refused")
        assert_refused_by((tmp_path / "second.log").read_text(), rc, live.pid)
        assert live.poll() is None, (tmp_path / "live.log").read_text()
        os.kill(live.pid, signal.SIGINT)                    # commits, then exits 130
        assert live.wait(timeout=120) == 130, (tmp_path / "live.log").read_text()
    finally:
        for p in (live, second):
            if p is not None:
                stop(p)
    assert_no_update_lost(run)
    assert lock_is_free(run)                                # released on the signal's way out


def test_two_resumes_after_a_kill_one_is_refused(tmp_path):
    run = tmp_path / "run"
    first = launch(["train", *LONG, "--out", run], tmp_path / "first.log")
    procs: list[subprocess.Popen] = [first]
    try:
        wait_for(lambda: len(list_commits(run)) >= 3, 180, "three commits", first)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        logs = [tmp_path / "resume-a.log", tmp_path / "resume-b.log"]
        pair = [launch(["train", "--resume", run], log) for log in logs]
        procs += pair
        end = time.monotonic() + 120
        while time.monotonic() < end and all(p.poll() is None for p in pair):
            time.sleep(0.1)
        done = [i for i, p in enumerate(pair) if p.poll() is not None]
        assert done, "both resumes trained at once"
        loser, winner = done[0], 1 - done[0]
        assert_refused_by(logs[loser].read_text(), pair[loser].returncode, pair[winner].pid)
        assert pair[winner].poll() is None, logs[winner].read_text()   # the stale lock of the killed run did not block
        wait_for(lambda: "resuming from commit" in logs[winner].read_text(), 60, "the resume to start", pair[winner])
        os.kill(pair[winner].pid, signal.SIGINT)
        assert pair[winner].wait(timeout=120) == 130, logs[winner].read_text()
    finally:
        for p in procs:
            stop(p)
    assert_no_update_lost(run)
    assert lock_is_free(run)


# ---- in-process: the lock held by "another process" (this test's own open file), and its release ----

@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    from hdppo.cli import main
    out = tmp_path_factory.mktemp("lock") / "run"
    assert main(["train", "grid", "--backend", "inline", "--workers", "1", "--seed", "0", "--no-progress",
                 "envs_per_worker=2", "rollout=16", "epochs=1", "minibatches=1", "--steps", "256",
                 "--out", str(out)]) == 0
    return out


def copy_run(src: Path, dst: Path) -> Path:
    import shutil
    shutil.copytree(src, dst, symlinks=True)
    return dst


class Holder:
    """A writer's lock on a run folder, as another process would hold it, with its note."""

    def __init__(self, run: Path, pid: int) -> None:
        self.f = open(run / LOCK, "a+b")
        fcntl.flock(self.f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.f.seek(0)
        self.f.truncate()
        self.f.write(json.dumps({"pid": pid, "command": "hdppo train grid --out run", "since": "now"}).encode())
        self.f.flush()

    def release(self) -> None:
        self.f.close()


def test_a_held_run_is_left_untouched_by_a_refused_resume_and_stays_readable(small_run, tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    run = copy_run(small_run, tmp_path / "run")
    leftover = run / "commits" / f".tmp-000009-{os.getpid()}-abcdef"   # the live writer's commit in progress
    leftover.mkdir()
    extra = run / "metrics" / "low.csv"
    with open(extra, "a") as f:                              # a row the live writer wrote after its commit
        f.write("999999,0.0\n")
    before = extra.read_text()
    holder = Holder(run, os.getpid())
    try:
        rc, out, err = cli(capsys, "train", "--resume", run)
        assert_refused_by(err, rc, os.getpid())
        assert leftover.is_dir() and extra.read_text() == before      # nothing cleaned or cut
        rc, out, err = cli(capsys, "train", "grid", "--steps", "64", "--out", run)   # a new run into it
        assert rc == 2 and "Traceback" not in err and "not empty" in err, err
        # readers keep working beside the writer
        rc, out, err = cli(capsys, "eval", run, "--episodes", "2")
        assert rc == 0, err
        assert json.loads((run / "eval.json").read_text())["episodes"] == 2
        rc, out, err = cli(capsys, "plot", run, "--out", tmp_path / "curves.png")
        assert rc == 0, err
        import hdppo
        assert hdppo.load(run).units
    finally:
        holder.release()
    assert lock_is_free(run)


def test_an_empty_folder_being_started_is_not_started_twice(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    holder = Holder(run, 4242)          # another `hdppo train --out run` has just locked it
    try:
        rc, _, err = cli(capsys, "train", "grid", "--backend", "inline", "--workers", "1", "--steps", "64",
                         "--out", run)
    finally:
        holder.release()
    assert rc == 2 and "Traceback" not in err and "pid 4242" in err, err
    assert sorted(p.name for p in run.iterdir()) == [LOCK]


def test_the_lock_goes_on_every_way_out(small_run, tmp_path, capsys):
    run = copy_run(small_run, tmp_path / "run")
    # an error after the lock was taken: --steps below what was done
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "1")
    assert rc == 2 and "fewer than" in err, err
    assert lock_is_free(run)
    # a normal end
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "320")
    assert rc == 0, err
    assert lock_is_free(run)
    # a lock file left behind by a writer that is gone (its pid recorded, its flock gone with it)
    (run / LOCK).write_text(json.dumps({"pid": 999999, "command": "hdppo train", "since": "then"}))
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "384")
    assert rc == 0, err
    assert lock_is_free(run)


def test_a_signal_releases_the_lock_in_process(small_run, tmp_path):
    """SIGINT in the middle of a run: it commits, raises RunInterrupted, and gives the lock back."""
    import threading

    from hdppo.engine.spec import RunSpec
    from hdppo.engine.trainer import RunInterrupted, Trainer
    run = copy_run(small_run, tmp_path / "run")
    trainer = Trainer(RunSpec.from_run(run, steps=200_000), resume=True)
    assert not lock_is_free(run)
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(RunInterrupted):
            trainer.run()
    finally:
        timer.cancel()
    assert lock_is_free(run)
    assert_consistent(run)
