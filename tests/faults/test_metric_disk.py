"""A disk that fills up while the metrics are written (issue 25, item 9): one line naming the file
and the commit kept, exit 2, no traceback, and the commits untouched: the run resumes from the last
one with every layer's updates at the same env steps and versions as an uninterrupted run.

Before: on a real 1 MiB tmpfs the one-line error was raised, TensorBoard's writer thread printed its
own traceback, and closing the writer raised a second OSError that replaced the first (exit 1). The
disk is simulated here by a byte budget shared by the CSV files (the `open` of hdppo.engine.metrics)
and TensorBoard's event file (tensorboard's local file system); where the test may mount a tmpfs
(root with CAP_SYS_ADMIN) it also runs on a real one.
"""
from __future__ import annotations

import builtins
import errno
import os
import shutil
import subprocess

import pytest
from tensorboard.compat.tensorflow_stub.io import gfile

from hdppo.engine import metrics
from hdppo.engine.commit import list_commits
from tests.helpers.cli import cli
from tests.helpers.faults import GRID, assert_consistent

RUN = [*GRID, "--backend", "inline", "--workers", "1", "--steps", "256", "checkpoint_every=2"]


class FullDisk:
    """`free` bytes left for the metrics; a write that does not fit fails with ENOSPC (no file name,
    as a buffered write's does) and so does every later one."""

    def __init__(self, free: int) -> None:
        self.free = free

    def take(self, n: int) -> None:
        if n > self.free:
            self.free = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.free -= n


class CountedFile:
    """A text file whose writes draw on a FullDisk."""

    def __init__(self, file, disk: FullDisk) -> None:
        self._file, self._disk = file, disk

    def write(self, text: str) -> int:
        self._disk.take(len(text.encode()))
        return self._file.write(text)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()


def fill_up(monkeypatch, free: int, csv: bool = True, tensorboard: bool = True) -> FullDisk:
    disk = FullDisk(free)
    if csv:
        def counted_open(path, mode="r", *args, **kwargs):
            f = builtins.open(path, mode, *args, **kwargs)
            return CountedFile(f, disk) if any(c in mode for c in "wa+") else f
        monkeypatch.setattr(metrics, "open", counted_open, raising=False)      # shadows the builtin there only
    if tensorboard:
        real = gfile.LocalFileSystem._write

        def counted_write(self, filename, content, mode):
            disk.take(len(content))
            return real(self, filename, content, mode)
        monkeypatch.setattr(gfile.LocalFileSystem, "_write", counted_write)
    return disk


def one_line(rc: int, out: str, err: str) -> str:
    assert "Traceback" not in out + err and "Exception in thread" not in err, err
    assert rc == 2, err
    lines = [line for line in err.splitlines() if not line.startswith("hdppo: warning:")]
    assert len(lines) == 2 and lines[0].startswith("hdppo: error:") and lines[1].startswith("  fix: "), err
    return lines[0]


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("metric_disk") / "reference"
    assert cli_plain(["train", *RUN, "--out", str(out)]) == 0
    return out


def cli_plain(args: list[str]) -> int:
    from hdppo.cli import main
    return main(args)


@pytest.mark.parametrize("where, free", [("both", 9_000), ("csv", 4_000), ("tensorboard", 9_000)])
def test_a_full_disk_while_writing_metrics_is_one_line_and_loses_no_commit(where, free, reference, tmp_path,
                                                                          capsys, monkeypatch):
    run = tmp_path / "run"
    with monkeypatch.context() as m:
        disk = fill_up(m, free, csv=where != "tensorboard", tensorboard=where != "csv")
        rc, out, err = cli(capsys, "train", *RUN, "--out", run)
    assert disk.free == 0, "the disk never filled up"
    line = one_line(rc, out, err)
    assert "No space left on device" in line and "kept: commit" in line, line
    named = {"both": ("metrics", "tb"), "csv": ("metrics",), "tensorboard": ("tb",)}[where]
    assert any(f"{run / part}" in line for part in named), line          # the file (or tb folder), not just the run
    assert "free disk space" in err and f"--resume {run}" in err
    commits = list_commits(run)
    assert commits and not [p for p in (run / "commits").iterdir() if p.name.startswith(".")]
    kept = int(line.split("kept: commit ")[1].split()[0])
    assert kept == max(commits)
    rc, out, err = cli(capsys, "train", "--resume", run)                  # space freed: it finishes the run
    assert rc == 0 and "Traceback" not in out + err, err
    assert f"resuming from commit {kept}" in out
    assert_consistent(run, reference)


def test_closing_after_a_failed_write_does_not_raise_again(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        fill_up(m, 200)
        sink = metrics.MetricsSink(tmp_path / "run")
        with pytest.raises(OSError) as first:
            for step in range(100):
                sink.log("low", step, {"loss": 0.5, "kl": 0.01})
                sink.flush()
        assert first.value.errno == errno.ENOSPC
        assert str(tmp_path / "run") in str(first.value.filename)
        with pytest.raises(OSError):                  # the same error again, not a new one
            sink.log("low", 100, {"loss": 0.5})
        sink.close()                                  # quiet: the error was raised already
        sink.close()


def test_a_failure_only_when_closing_is_one_hdppo_error(tmp_path, monkeypatch):
    from hdppo.errors import HdppoError
    sink = metrics.MetricsSink(tmp_path / "run", tensorboard=False)
    sink.log("low", 0, {"loss": 0.5})

    class Failing:
        def close(self):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    sink._csvs["low"].file.close()
    sink._csvs["low"].file = Failing()
    with pytest.raises(HdppoError) as info:
        sink.close()
    assert str(metrics.scope_file(tmp_path / "run", "low")) in info.value.problem
    assert "kept: every commit" in info.value.problem and "free disk space" in info.value.fix


# ---- a real tmpfs, where the test may mount one -----------------------------------------------------
def _mount(point, size: str) -> bool:
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def tiny_tmpfs(tmp_path):
    point = tmp_path / "disk"
    if not _mount(point, "160k"):
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    yield point
    subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_real_full_tmpfs_is_one_line_and_the_run_resumes(tiny_tmpfs, capsys):
    run = tiny_tmpfs / "run"
    args = [*GRID, "--backend", "inline", "--workers", "1", "--steps", "100000000", "log_every=0",
            "checkpoint_every=100000", "checkpoint_seconds=100000"]      # metrics grow, commit 0 stays the only one
    rc, out, err = cli(capsys, "train", *args, "--out", run)
    line = one_line(rc, out, err)
    assert "No space left on device" in line and f"{run}/" in line and "kept: commit 0" in line, line
    assert list_commits(run) == [0]
    subprocess.run(["mount", "-o", "remount,size=64m", str(tiny_tmpfs)], check=True)     # space freed
    rc, out, err = cli(capsys, "train", "--resume", run, "--steps", "256")
    assert rc == 0 and "Traceback" not in out + err, err
    assert_consistent(run)
