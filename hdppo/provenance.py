"""What made a result: the commit of the hdppo source, the package versions, the machine.

Every run folder gets a provenance.json at train start; evidence reports print it, so a report
says which code and which packages its numbers came from.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("hdppo", "torch", "numpy", "gymnasium", "pettingzoo", "supersuit", "mpe2", "vmas", "ray")
FILE = "provenance.json"


def source_commit(root: Path | None = None) -> tuple[str | None, list[str]]:
    """(commit, the tracked files that differ from it) of the git checkout holding hdppo's source, or
    (None, []) outside one. Untracked files are not counted."""
    root = root or Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(root), "diff", "--name-only", "HEAD", "--"],
                              capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, []
    return head, sorted(line for line in diff.splitlines() if line)


def versions() -> dict[str, str]:
    """Installed versions of the packages results depend on (those present)."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def cpu_model() -> str:
    """The processor's model name (Linux), else what the platform module says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict[str, Any]:
    commit, changed = source_commit()
    return {"commit": commit, "dirty": bool(changed), "changed": changed, "versions": versions(),
            "python": sys.version.split()[0], "platform": platform.platform(), "cpu": cpu_model(),
            "cpus": os.cpu_count()}


def record(run: str | Path) -> None:
    """Write RUN/provenance.json (at train start)."""
    (Path(run) / FILE).write_text(json.dumps(provenance(), indent=2))


def read(run: str | Path) -> dict[str, Any] | None:
    path = Path(run) / FILE
    return json.loads(path.read_text()) if path.is_file() else None


def describe(record: dict[str, Any] | None) -> str:
    """One line for a report: commit (and the files that differed from it), the main versions."""
    if record is None:
        return "not recorded (the run predates provenance records)"
    v = record.get("versions", {})
    packages = ", ".join(f"{k} {v[k]}" for k in PACKAGES if k in v)
    return f"commit {describe_commit(record)}; {packages}; Python {record.get('python')}; {record.get('cpus')} CPUs"


def describe_commit(record: dict[str, Any], named: int = 3) -> str:
    """The record's commit, and the first `named` files that differed from it: "0123456789 with
    uncommitted changes to a, b and 2 more files"."""
    commit = (record.get("commit") or "no git checkout")[:10]
    if not record.get("dirty"):
        return commit
    changed = record.get("changed") or []            # records made before 2026-12-05 kept no file names
    if not changed:
        return commit + " with uncommitted changes"
    more = f" and {len(changed) - named} more files" if len(changed) > named else ""
    return commit + " with uncommitted changes to " + ", ".join(changed[:named]) + more
