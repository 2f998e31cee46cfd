"""Helpers of the fault-injection suite: `hdppo` as a real OS process, and the integrity checks
every faulted run must pass against an uninterrupted one."""
from __future__ import annotations

import csv
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

GRID = ["grid", "--layer", "all", "--seed", "0", "--no-progress", "envs_per_worker=2", "low.rollout=16",
        "mid.rollout=32", "high.rollout=64", "epochs=2", "minibatches=2"]


def launch(args: list[str], log: Path, **env: str) -> subprocess.Popen:
    """`python -m hdppo.cli ARGS` in its own process (own session, so signals reach only it)."""
    full = dict(os.environ, COLUMNS="300", PYTHONUNBUFFERED="1", **env)
    f = open(log, "w")
    return subprocess.Popen([sys.executable, "-m", "hdppo.cli", *map(str, args)], stdout=f, stderr=subprocess.STDOUT,
                            env=full, start_new_session=True)


def wait_for(pred, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (rc {proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def column(run: Path, scope: str, key: str) -> list[float]:
    return [float(r[key]) for r in rows(run / "metrics" / f"{scope}.csv")]


def assert_consistent(run: Path, reference: Path | None = None) -> None:
    """Every CSV: steps strictly increasing; every layer: versions strictly increasing; with a
    reference (an uninterrupted run), each layer updated at exactly the same env steps and versions."""
    for path in sorted((run / "metrics").glob("*.csv")):
        steps = [int(r["step"]) for r in rows(path)]
        assert all(a < b for a, b in itertools.pairwise(steps)), f"{path.name}: a step repeats or goes back"
    for layer in ("low", "mid", "high"):
        versions = column(run, layer, "version")
        assert all(a < b for a, b in itertools.pairwise(versions)), f"{layer}: a version goes back"
        if reference is not None:
            assert column(run, layer, "step") == column(reference, layer, "step"), f"{layer}: missing or extra updates"
            assert versions == column(reference, layer, "version"), layer
