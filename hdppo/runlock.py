"""One writer per run folder: an exclusive `flock` on RUN/.lock, held for the life of a training run
or a resume.

The lock is the kernel's, on the open file, so it goes when the process ends however it ends
(normal exit, exception, signal, SIGKILL): a lock file left by a killed run never blocks. The file
keeps only a note of its holder (pid, command, host; its mtime says since when) so that a second
writer is told who holds the folder; the note is never what decides. Readers (`hdppo eval`,
`plot`, `hdppo.load`, ...) take no lock: a commit becomes visible in one rename, and what they
write themselves (eval.json, curves.png, export/, diagnose/) training never touches.

Where `fcntl` is missing (Windows) the lock is a no-op.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from hdppo.errors import HdppoError

try:
    import fcntl
except ImportError:           # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"


class RunLocked(HdppoError):
    """Another process holds the run folder's write lock."""


def holder(run: str | Path) -> dict[str, Any]:
    """The note the lock's holder left in RUN/.lock (pid, command, host) and since when it holds it
    (the file's mtime); {} when there is none or it is unreadable."""
    try:
        with open(Path(run) / LOCK_FILE, "rb") as f:
            data = json.loads(f.read(4096).decode("utf-8"))
            since = os.fstat(f.fileno()).st_mtime
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {**data, "since": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))}


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:            # alive, someone else's
        return True
    return True


class RunLock:
    """The exclusive write lock of one run folder; `acquire()` raises RunLocked naming the holder."""

    def __init__(self, run: str | Path, command: str | None = None) -> None:
        self.run = Path(run)
        self.path = self.run / LOCK_FILE
        self.command = command or _command()
        self._file: IO[bytes] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self) -> RunLock:
        if self._file is not None:
            return self
        f = open(self.path, "a+b")      # never truncated before the lock is ours: the note is the holder's
        if fcntl is not None:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                raise self._refusal() from None
            except OSError:
                f.close()
                raise
        note = json.dumps({"pid": os.getpid(), "command": self.command, "host": socket.gethostname()}).encode()
        f.seek(0)
        if f.read(len(note) + 1) != note:      # the same writer again (in-process): the file stays as it is
            f.seek(0)
            f.truncate()
            f.write(note)                       # its mtime: since when the holder holds it
            f.flush()
        self._file = f
        return self

    def release(self) -> None:
        """Give the lock back (the file stays: removing it would let a third process lock a new
        inode while a second still waits on the old one)."""
        f, self._file = self._file, None
        if f is None:
            return
        try:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        finally:
            f.close()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _refusal(self) -> RunLocked:
        note = holder(self.run)
        for _ in range(10):              # the holder writes its note right after locking: let it land
            if _alive(note.get("pid")):
                break
            time.sleep(0.05)
            note = holder(self.run)
        pid = note.get("pid")
        who = f"pid {pid}" if isinstance(pid, int) else "a process whose pid it did not record"
        details = ", since ".join(str(note[k]) for k in ("command", "since") if note.get(k))
        host = note.get("host")
        if host and host != socket.gethostname():
            details += f", on host {host}"
        stop = f"stop it (kill -INT {pid})" if isinstance(pid, int) else "stop it"
        return RunLocked(f"run folder {self.run} is being written by another hdppo process ({who}"
                         + (f": {details}" if details else "") + "); a second writer would mix their commits "
                         "and metrics", f"wait for it to end or {stop}, then `hdppo train --resume {self.run}`; "
                         f"`hdppo eval`, `plot` and `hdppo.load` can read {self.run} meanwhile")


def _command() -> str:
    """This process's command line, short: `hdppo train --resume R` (also under `python -m hdppo.cli`)."""
    argv = list(sys.argv) or ["python"]
    head = Path(argv[0]).name
    if head in ("__main__.py", "hdppo") or argv[0].endswith("hdppo/cli/__main__.py"):
        head = "hdppo"
    return " ".join([head, *argv[1:]])[:300]
