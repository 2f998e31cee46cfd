"""Run commits: the trainer's state and every trained layer's checkpoint written as one unit.

A commit is a folder ``RUN/commits/NNNNNN/`` holding ``state.json`` (counters, stage, schedules),
one checkpoint folder per trained layer (``LAYER/tensors.safetensors`` + ``LAYER/meta.json``) and
``manifest.json``, which names every file with its sha256 and the number of rows each metrics CSV
had. It is built in ``commits/.tmp-NNNNNN-TOKEN/``, every file fsync'd, then renamed into place in
one atomic step, so a folder named ``NNNNNN`` is complete by construction. ``RUN/checkpoints`` is
a relative symlink to the newest commit (what ``hdppo eval`` and ``--load`` read), swapped
atomically after the rename. Leftovers of an interrupted commit are removed by ``recover``.

``RUN/best`` is the commit of the best evaluation during training (hdppo/engine/evaluation.py): a
relative symlink to ``best_commits/NNNNNN-TOKEN/``, a copy of that commit (its files hard-linked, so
pruning the commit leaves it whole) with ``best.json`` (the score and how it was measured), built
and swapped in the same way, so a crash leaves the previous best or the new one, each whole.

``HDPPO_FAULT_WRITE=N:kill`` (or ``N:enospc``, ``N:erofs``) makes the Nth write step of this
process's commits exit at once (``os._exit(137)``, as SIGKILL) or fail with ENOSPC or EROFS: the
fault-injection tests use it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hdppo.engine.checkpoint import META_FILE, TENSORS_FILE, _fsync_dir, _write_bytes, save_checkpoint

FORMAT_NAME = "hdppo-run-commit"
FORMAT_VERSION = 1
COMMITS = "commits"
MANIFEST = "manifest.json"
STATE = "state.json"
LINK = "checkpoints"
BEST = "best"                  # RUN/best -> best_commits/NNNNNN-TOKEN
BEST_STORE = "best_commits"
BEST_RECORD = "best.json"
KEEP = 3                       # complete commits kept (the newest and two fallbacks)
NUMBER = re.compile(r"[0-9]+")  # a commit folder's name: ASCII digits only ('²'.isdigit() is true, int() fails)
SHA256 = re.compile(r"[0-9a-f]{64}")
STATE_LIMIT = 16 << 20         # a state.json larger than this is not one hdppo wrote

_writes = 0                    # write steps of commits in this process (fault injection)


def _fault_point() -> None:
    """Count one write step; kill the process or raise ENOSPC at the step HDPPO_FAULT_WRITE names."""
    global _writes
    _writes += 1
    spec = os.environ.get("HDPPO_FAULT_WRITE", "")
    if not spec:
        return
    n, _, kind = spec.partition(":")
    if int(n) == _writes:
        if kind in ("enospc", "erofs"):
            code = errno.ENOSPC if kind == "enospc" else errno.EROFS
            raise OSError(code, os.strerror(code), "(injected)")
        os._exit(137)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def commit_name(n: int) -> str:
    return f"{n:06d}"


@dataclass
class Commit:
    """One complete commit on disk."""

    number: int
    path: Path
    manifest: dict[str, Any]

    @property
    def layers(self) -> list[str]:
        return list(self.manifest.get("layers", []))

    @property
    def env_steps(self) -> int:
        return int(self.manifest.get("env_steps", 0))

    def layer_dir(self, layer: str) -> Path:
        return self.path / layer

    def state(self) -> dict[str, Any]:
        path = self.path / STATE
        if path.stat().st_size > STATE_LIMIT:
            raise ValueError(f"{path} is over {STATE_LIMIT >> 20} MiB, not a state hdppo wrote")
        return json.loads(path.read_text())


# ---------------------------------------------------------------------------------------------
# writing


def write_commit(run: Path, number: int, state: dict[str, Any],
                 fresh: dict[str, tuple[dict[str, torch.Tensor], dict]],
                 carried: dict[str, Path], metrics_rows: dict[str, int]) -> Commit:
    """Write commit `number`: `fresh` layers from their (tensors, meta), `carried` layers' files
    hard-linked (or copied) from an earlier commit's layer folder; then swap the symlink and prune."""
    root = run / COMMITS
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{commit_name(number)}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    tmp.mkdir()
    try:
        files: dict[str, str] = {}
        for layer, (tensors, meta) in fresh.items():
            save_checkpoint(tmp / layer, tensors, meta)
            _fault_point()
        for layer, src in carried.items():
            (tmp / layer).mkdir()
            for name in (TENSORS_FILE, META_FILE):
                _link_or_copy(src / name, tmp / layer / name)
            _fsync_dir(tmp / layer)
            _fault_point()
        sizes: dict[str, int] = {}
        for layer in [*fresh, *carried]:
            for name in (TENSORS_FILE, META_FILE):
                files[f"{layer}/{name}"] = sha256_file(tmp / layer / name)
                sizes[f"{layer}/{name}"] = (tmp / layer / name).stat().st_size
        state_bytes = json.dumps(state, indent=2, default=str).encode()
        _write_bytes(tmp / STATE, state_bytes)
        files[STATE] = hashlib.sha256(state_bytes).hexdigest()
        sizes[STATE] = len(state_bytes)
        _fault_point()
        manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "commit": number,
                    "env_steps": int(state.get("env_steps", 0)), "stage": int(state.get("stage", 0)),
                    "layers": sorted([*fresh, *carried]), "files": files, "sizes": sizes,
                    "metrics_rows": metrics_rows}
        _write_bytes(tmp / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode())
        _fsync_dir(tmp)
        _fault_point()
        final = root / commit_name(number)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(root)
    _fault_point()
    point_checkpoints(run, number)
    _fault_point()
    prune(run)
    return Commit(number, final, manifest)


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link (commit files are never changed in place), a copy where links are not possible."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def point_checkpoints(run: Path, number: int) -> None:
    """Make RUN/checkpoints a relative symlink to commit `number`, atomically (a real folder left
    by copying a run is moved aside first)."""
    _point(run, LINK, os.path.join(COMMITS, commit_name(number)))


def _point(run: Path, name: str, target: str) -> None:
    """Make RUN/name a relative symlink to `target`, in one os.replace."""
    link = run / name
    tmp = run / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    os.symlink(target, tmp)
    if link.is_dir() and not link.is_symlink():
        aside = run / f".{name}.old-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        os.rename(link, aside)
        os.replace(tmp, link)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(tmp, link)
    _fsync_dir(run)


def write_best(run: Path, commit: Commit, record: dict[str, Any]) -> Path:
    """Make RUN/best a copy of `commit` with `record` as its best.json (see the module docstring)."""
    store = run / BEST_STORE
    store.mkdir(exist_ok=True)
    name = f"{commit_name(commit.number)}-{uuid.uuid4().hex[:6]}"
    tmp = store / f".tmp-{name}"
    tmp.mkdir()
    try:
        for rel in [*commit.manifest["files"], MANIFEST]:
            (tmp / rel).parent.mkdir(exist_ok=True)
            _link_or_copy(commit.path / rel, tmp / rel)
        for layer in commit.layers:
            _fsync_dir(tmp / layer)
        _write_bytes(tmp / BEST_RECORD, json.dumps(record, indent=2, sort_keys=True).encode())
        _fsync_dir(tmp)
        _fault_point()
        os.rename(tmp, store / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(store)
    _fault_point()
    _point(run, BEST, os.path.join(BEST_STORE, name))
    _prune_best(run)
    return store / name


def read_best(run: Path) -> dict[str, Any] | None:
    """RUN/best's best.json, or None when the run has no (readable) best."""
    try:
        record = json.loads((run / BEST / BEST_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _prune_best(run: Path) -> None:
    """Remove the copies in best_commits/ that RUN/best does not point at (older bests, leftovers)."""
    store = run / BEST_STORE
    if not store.is_dir():
        return
    link = run / BEST
    current = os.path.basename(os.readlink(link)) if link.is_symlink() else None
    for p in store.iterdir():
        if p.name == current:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def prune(run: Path, keep: int = KEEP) -> None:
    """Remove all but the newest `keep` complete commits."""
    for n in list_commits(run)[:-keep]:
        shutil.rmtree(run / COMMITS / commit_name(n), ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# reading


def list_commits(run: Path) -> list[int]:
    """Numbers of the commit folders (complete by construction), oldest first."""
    root = run / COMMITS
    if not root.is_dir():
        return []
    return sorted(int(p.name) for p in root.iterdir()
                  if NUMBER.fullmatch(p.name) and p.is_dir() and not p.is_symlink())


def plain_name(name: Any) -> bool:
    """A name that stays one folder inside the folder it is joined to (no '/', '..', NUL)."""
    return (isinstance(name, str) and bool(name) and name not in (".", "..")
            and not any(c in name for c in "/\\\0"))


def open_commit(run: Path, number: int) -> Commit:
    """The commit's manifest, checked for format and for names that would lead outside the commit;
    CommitError naming the problem otherwise."""
    path = run / COMMITS / commit_name(number)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise CommitError(f"commit {path} has no readable {MANIFEST} ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME \
            or manifest.get("format_version") != FORMAT_VERSION or not isinstance(manifest.get("files"), dict):
        raise CommitError(f"commit {path}: {MANIFEST} is not an hdppo run commit of format {FORMAT_VERSION}")
    problem = _manifest_problem(manifest)
    if problem:
        raise CommitError(f"{path / MANIFEST} {problem}")
    return Commit(number, path, manifest)


def _manifest_problem(m: dict[str, Any]) -> str:
    """What makes a manifest unusable (a name leading outside the commit, a wrong type), or ''."""
    layers = m.get("layers", [])
    if not isinstance(layers, list):
        return f"has layers {layers!r}, not a list"
    for layer in layers:
        if not plain_name(layer):
            return f"lists layer {layer!r}, which is not a plain folder name"
    allowed = {STATE} | {f"{layer}/{name}" for layer in layers for name in (TENSORS_FILE, META_FILE)}
    for rel, digest in m["files"].items():
        if rel not in allowed:
            return f"lists file {rel!r}, which is none of the commit's own (state.json, LAYER/{TENSORS_FILE}, " \
                   f"LAYER/{META_FILE} of a listed layer)"
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            return f"has {digest!r} as the sha256 of {rel}"
    sizes = m.get("sizes", {})
    if not isinstance(sizes, dict) or not all(k in allowed and _count(v) for k, v in sizes.items()):
        return "has malformed file sizes"
    rows = m.get("metrics_rows", {})
    if not isinstance(rows, dict) or not all(plain_name(k) and _count(v) for k, v in rows.items()):
        return "has malformed metrics_rows"
    for key in ("env_steps", "stage"):
        if key in m and not _count(m[key]):
            return f"has {key} {m[key]!r}, not a whole number >= 0"
    return ""


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


class CommitError(ValueError):
    """A commit folder is unreadable or does not match its manifest."""


def damaged(commit: Commit) -> dict[str, str]:
    """What does not match the manifest: {layer or 'state': problem}; empty when the commit is whole."""
    problems: dict[str, str] = {}
    sizes = commit.manifest.get("sizes", {})
    inside = commit.path.resolve()
    for rel, want in commit.manifest["files"].items():
        key = rel.split("/")[0] if "/" in rel else "state"
        path = commit.path / rel
        if not path.is_file():
            problems.setdefault(key, f"{rel} is missing")
        elif not path.resolve().is_relative_to(inside):
            problems.setdefault(key, f"{rel} is a link that leads outside the commit")
        elif rel.endswith(TENSORS_FILE) and rel in sizes and path.stat().st_size != sizes[rel]:  # before hashing it
            problems.setdefault(key, f"{rel} is {path.stat().st_size:,} bytes, {MANIFEST} records {sizes[rel]:,}")
        elif sha256_file(path) != want:
            problems.setdefault(key, f"{rel} does not match its sha256 in {MANIFEST}")
    for layer in commit.layers:
        if f"{layer}/{TENSORS_FILE}" not in commit.manifest["files"]:
            problems.setdefault(layer, f"{MANIFEST} lists no files for it")
    return problems


def recover(run: Path) -> list[Path]:
    """Remove what interrupted commits and saves left behind; returns what was removed."""
    removed = []
    _prune_best(run)
    patterns = [(run / COMMITS, ".tmp-*"), (run, f".{LINK}.tmp-*"), (run, f".{LINK}.old-*"), (run, f".{BEST}.tmp-*"),
                (run, "*.tmp"), (run / "metrics", "*.tmp")]
    link = run / LINK
    if link.is_dir() and not link.is_symlink():         # a copied run, or an older layout
        patterns += [(link, ".*.tmp-*"), (link, ".*.old-*")]
    for folder, pattern in patterns:
        if not folder.is_dir():
            continue
        for p in folder.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed
