"""Resuming a run: choose the commit to continue from, refuse a damaged one, put the metrics back.

The newest commit is used, never an older one silently: when a layer it should hold is missing or
damaged the error names the layer and the newest older commit that is whole, and `--reinit LAYER`
is the only way to continue with that layer re-created from random weights. Metrics CSV rows
written after the commit are cut off, so no env step appears twice.
"""
from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hdppo.engine.commit import COMMITS, Commit, CommitError, commit_name, damaged, list_commits, open_commit
from hdppo.errors import ConfigError


def expected_layers(stages: Sequence[Any], state: dict[str, Any]) -> list[str]:
    """The layers a commit with this state must hold: those of every finished stage, and those of
    the current stage once it has run any env steps."""
    stage = int(state.get("stage", 0))
    names: list[str] = []
    for i, s in enumerate(stages):
        if i < stage or (i == stage and int(state.get("stage_steps", 0)) > 0):
            names += [n for n in s.trained if n not in names]
    return names


def problems_of(commit: Commit, stages: Sequence[Any]) -> tuple[dict[str, str], dict[str, Any] | None]:
    """({layer or 'state': problem}, the commit's state or None when unreadable)."""
    problems = damaged(commit)
    if "state" in problems:
        return problems, None
    try:
        state = commit.state()
    except (OSError, ValueError) as exc:
        return {"state": f"state.json cannot be read ({exc})"}, None
    bad = state_problem(state, len(stages))
    if bad:
        return {"state": f"{commit.path / 'state.json'} {bad}"}, None
    for layer in expected_layers(stages, state):
        if layer not in commit.layers:
            problems.setdefault(layer, "it is missing from the commit")
    return problems, state


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def state_problem(state: Any, n_stages: int) -> str:
    """What makes a commit's state.json unusable (a wrong type or an impossible value), or ''."""
    if not isinstance(state, dict):
        return f"is a {type(state).__name__}, not an object"
    for key in ("env_steps", "stage", "stage_steps"):
        if not _count(state.get(key)):
            return f"has {key} {state.get(key)!r}, not a whole number >= 0"
    if state["stage"] > n_stages:
        return f"has stage {state['stage']}, but the run has {n_stages} stage(s)"
    if not isinstance(state.get("finished", False), bool):
        return f"has finished {state['finished']!r}, not true or false"
    workers = state.get("worker_steps", [])
    if not isinstance(workers, list) or not all(_count(w) for w in workers):
        return f"has worker_steps {workers!r}, not a list of whole numbers >= 0"
    return ""


def choose_commit(run: Path, stages: Sequence[Any], reinit: set[str]) -> tuple[Commit, dict[str, Any]]:
    """The newest commit and its state; ConfigError (naming the layer and the newest older commit
    that is whole) when something it must hold is missing or damaged, unless `reinit` covers it."""
    numbers = list_commits(run)
    if not numbers:
        legacy = (run / "checkpoints").is_dir() and not (run / "checkpoints").is_symlink()
        if legacy:
            raise ConfigError(f"{run} was written by an hdppo without run commits, so its checkpoints and "
                              "state.json may disagree and it cannot be resumed safely",
                              f"start a new run warm-started from it: --load LAYER={run}/checkpoints/LAYER")
        raise ConfigError(f"{run} holds no run commit ({run}/{COMMITS}/ is empty or missing): the run was stopped "
                          "before its first commit, or this is not an hdppo run folder",
                          "start the run again (a new --out), or pass the folder a `hdppo train` run wrote")
    try:
        newest = open_commit(run, numbers[-1])
        problems, state = problems_of(newest, stages)
    except CommitError as exc:
        newest, problems, state = None, {"manifest": str(exc)}, None
    blocking = {k: v for k, v in problems.items() if k not in reinit}
    if not blocking and newest is not None and state is not None:
        return newest, state
    name = commit_name(numbers[-1])
    what = "; ".join(v if k == "manifest" else f"the trainer state: {v}" if k == "state" else f"layer {k!r}: {v}"
                     for k, v in blocking.items())
    fallback = _newest_whole(run, numbers[:-1], stages)
    fixes = []
    layers = [k for k in blocking if k not in ("state", "manifest")]
    if layers and "state" not in blocking:
        fixes.append(f"pass --reinit {','.join(layers)} to continue with {'them' if len(layers) > 1 else 'it'} "
                     "re-created from random weights")
    if fallback is not None:
        fixes.append(f"move {run}/{COMMITS}/{name} aside to resume from commit {commit_name(fallback.number)} "
                     f"(env step {fallback.env_steps:,}), which is whole")
    else:
        fixes.append("no older commit is whole; start the run again")
    raise ConfigError(f"commit {name} of {run} cannot be resumed: {what}", ", or ".join(fixes))


def _newest_whole(run: Path, numbers: list[int], stages: Sequence[Any]) -> Commit | None:
    for n in reversed(numbers):
        try:
            c = open_commit(run, n)
            problems, _ = problems_of(c, stages)
        except CommitError:
            continue
        if not problems:
            return c
    return None


# ---------------------------------------------------------------------------------------------
# metrics


def metrics_rows(run: Path) -> dict[str, int]:
    """Data rows per metrics CSV (file name -> rows), as a commit records them."""
    out = {}
    folder = run / "metrics"
    if folder.is_dir():
        for path in sorted(folder.glob("*.csv")):
            with open(path, newline="") as f:
                out[path.name] = max(sum(1 for _ in csv.reader(f)) - 1, 0)
    return out


def check_metrics(run: Path, rows: dict[str, int]) -> None:
    """Refuse (ConfigError naming the file) a metrics CSV the resume could not cut back or extend:
    not text, not CSV, no `step` column, or a row up to the commit's that has no env step. Nothing
    is changed before every CSV passed."""
    folder = run / "metrics"
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.csv")):
        keep = rows.get(path.name)
        if keep is None:
            continue                                # removed by the resume anyway
        why = _csv_problem(path, keep)
        if why:
            raise ConfigError(f"metrics file {path} cannot be resumed: {why}",
                              f"restore it, or move it aside to resume without its rows (a new {path.name} "
                              "starts at the resumed env step)")


def _csv_problem(path: Path, keep: int) -> str:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header or header[0] != "step":
                return "its first line is not a header starting with `step`"
            for line, row in enumerate(reader, start=2):
                if line - 1 > keep:
                    break
                if not row or not row[0].isascii() or not row[0].isdigit():
                    return f"line {line} has no env step (a whole number) in its first column"
    except UnicodeDecodeError as exc:
        return f"it is not text (byte {exc.start})"
    except csv.Error as exc:
        return f"it is not CSV ({exc})"
    return ""


def truncate_metrics(run: Path, rows: dict[str, int]) -> dict[str, int]:
    """Cut every metrics CSV back to the rows a commit recorded; a CSV the commit did not know is
    removed. Returns the rows dropped per file."""
    dropped: dict[str, int] = {}
    folder = run / "metrics"
    if not folder.is_dir():
        return dropped
    for path in sorted(folder.glob("*.csv")):
        keep = rows.get(path.name)
        with open(path, newline="") as f:
            lines = list(csv.reader(f))
        if keep is None:
            dropped[path.name] = max(len(lines) - 1, 0)
            path.unlink()
            continue
        if len(lines) - 1 <= keep:
            continue
        dropped[path.name] = len(lines) - 1 - keep
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            csv.writer(f).writerows(lines[:keep + 1])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return dropped
