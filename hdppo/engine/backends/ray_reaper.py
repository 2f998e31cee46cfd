"""The Ray backend's reaper: what a local Ray leaves behind when its driver dies is killed.

Ray ties its GCS and raylet to the driver that started them (they die with it), but the raylet's
agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) outlive a SIGKILLed driver for good, and
its workers for seconds. `Reaper` starts this module as a small process of its own session (so
Ctrl-C to the driver's group does not reach it): every `POLL_S` it notes the Ray processes below
the driver that were not there before Ray started, and when the pipe from the driver closes
without `done` (the driver died, however) it kills those still running (SIGTERM, then SIGKILL
after `GRACE_S`). After a clean `ray.shutdown()` the driver writes `done` first; the reaper then
only kills what is still running `GRACE_S` later (nothing, normally). It never imports Ray.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO

import psutil

POLL_S = 1.0          # how often the reaper notes the driver's Ray processes
GRACE_S = 3.0         # how long processes get to end by themselves before SIGKILL
RAY_NAMES = ("gcs_server", "raylet")


class Reaper:
    """The driver's handle on its reaper process (start it just before `ray.init`)."""

    def __init__(self) -> None:
        before = [p.pid for p in psutil.Process().children(recursive=True)]     # not Ray's: never touched
        self.proc: subprocess.Popen | None = None
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "hdppo.engine.backends.ray_reaper", str(os.getpid()),
                                          json.dumps(before)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except OSError:                     # no reaper is no reason not to train
            self.proc = None

    def done(self) -> None:
        """Ray was shut down cleanly: the reaper sweeps what is left, if anything, and exits."""
        proc, self.proc = self.proc, None
        if proc is None or proc.stdin is None:
            return
        try:
            proc.stdin.write(b"done\n")
            proc.stdin.close()
        except OSError:
            pass


def _is_ray(p: psutil.Process) -> bool:
    try:
        name, cmd = p.name(), p.cmdline()
    except (psutil.Error, OSError):
        return False
    line = " ".join(cmd)
    return name in RAY_NAMES or name.startswith("ray::") or line.startswith("ray::") or f"{os.sep}ray{os.sep}" in line


def _note(driver: psutil.Process, skip: set[int], known: dict[int, psutil.Process]) -> None:
    try:
        below = driver.children(recursive=True)
    except (psutil.Error, OSError):
        return
    for p in below:
        if p.pid not in skip and p.pid not in known and _is_ray(p):
            known[p.pid] = p


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:    # is_running also checks the pid's identity
                out.append(p)
        except (psutil.Error, OSError):
            pass
    return out


def _sweep(known: dict[int, psutil.Process], wait_first: float) -> None:
    procs = list(known.values())
    end = time.monotonic() + wait_first
    while _alive(procs) and time.monotonic() < end:
        time.sleep(0.1)
    left = _alive(procs)
    for p in list(left):
        try:
            left.extend(c for c in p.children(recursive=True) if c not in left)
        except (psutil.Error, OSError):
            pass
    for p in left:
        try:
            p.terminate()
        except (psutil.Error, OSError):
            pass
    _, still = psutil.wait_procs(left, timeout=GRACE_S)
    for p in still:
        try:
            p.kill()
        except (psutil.Error, OSError):
            pass


def main(argv: list[str], stdin: IO[str] | None = None) -> None:
    for sig in (signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    stdin = stdin or sys.stdin
    skip = set(json.loads(argv[1])) | {os.getpid()}
    try:
        driver = psutil.Process(int(argv[0]))
    except (psutil.Error, OSError):
        return
    known: dict[int, psutil.Process] = {}
    clean = False
    while True:
        _note(driver, skip, known)
        ready, _, _ = select.select([stdin], [], [], POLL_S)
        if ready:
            line = stdin.readline()
            if not line:                         # the driver closed the pipe: it ended or was killed
                break
            clean = clean or line.strip() == "done"
    _sweep(known, GRACE_S if clean else 0.0)


if __name__ == "__main__":
    main(sys.argv[1:])
