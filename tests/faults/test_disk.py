"""A full disk (ENOSPC) at each write step of a commit, and read-only folders: one line naming the
path and what was kept, rc 2, and the run resumes from what was kept with nothing lost."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from hdppo.engine import commit as commit_mod
from hdppo.engine.commit import list_commits
from tests.helpers.cli import cli
from tests.helpers.faults import GRID, assert_consistent

RUN = [*GRID, "--backend", "inline", "--workers", "1", "--steps", "256"]
WRITES = 11        # commit 0 (no layers): 4 write steps; the final commit (3 layers): 7


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if not line.startswith("hdppo: warning:")]
    assert lines and lines[0].startswith("hdppo: error:") and "Traceback" not in err, err
    assert any(line.strip().startswith("fix:") for line in lines), err
    return lines[0]


@pytest.fixture(autouse=True)
def _fresh_counter(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(commit_mod, "_writes", 0)


@pytest.mark.parametrize("kind", ["enospc", "erofs"])
def test_a_failed_write_at_every_step_of_a_commit_loses_nothing(kind, tmp_path, capsys, monkeypatch):
    reference = tmp_path / "reference"
    assert cli(capsys, "train", *RUN, "--out", reference)[0] == 0
    for n in range(1, WRITES + 1):
        run = tmp_path / f"run{n}"
        monkeypatch.setattr(commit_mod, "_writes", 0)
        monkeypatch.setenv("HDPPO_FAULT_WRITE", f"{n}:{kind}")
        rc, _, err = cli(capsys, "train", *RUN, "--out", run)
        monkeypatch.delenv("HDPPO_FAULT_WRITE")
        assert rc == 2, (n, err)
        line = one_line_error(err)
        assert ("No space left on device" if kind == "enospc" else "Read-only file system") in line, line
        assert "kept:" in line
        assert not [p for p in (run / "commits").iterdir() if p.name.startswith(".")], n   # no half commit left
        if not list_commits(run):
            assert "kept: nothing" in line and "start the run again" in err
            continue
        rc, _, err = cli(capsys, "train", "--resume", run)
        assert rc == 0, (n, err)
        assert_consistent(run, reference)


def test_read_only_out_folder_is_one_line(tmp_path, capsys, monkeypatch):
    target = tmp_path / "ro" / "run"
    if os.geteuid() != 0:                           # a real read-only folder
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o500)
    else:                                           # root writes anywhere: the OS error is injected at mkdir
        real = Path.mkdir

        def mkdir(self, *a, **k):
            if str(self).startswith(str(tmp_path / "ro")):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            return real(self, *a, **k)
        monkeypatch.setattr(Path, "mkdir", mkdir)
    try:
        rc, _, err = cli(capsys, "train", *RUN, "--out", target)
    finally:
        if os.geteuid() != 0:
            (tmp_path / "ro").chmod(0o700)
    assert rc == 2, err
    line = one_line_error(err)
    assert str(target) in line and "kept: nothing" in line, line
