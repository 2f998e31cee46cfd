"""A run's provenance names the files that differed from its commit.

An evidence campaign writes its own data file (docs/evidence/NAME-runs.json) into the checkout as
each seed finishes, so every later run of it started in a tree with changes; a bare "with
uncommitted changes" could not tell that file from an edit of the code.
"""
import subprocess
from pathlib import Path

from hdppo import provenance


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "hdppo").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "hdppo" / "engine.py").write_text("x = 1\n")
    (root / "docs" / "runs.json").write_text("[]\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return root


def test_a_clean_checkout_has_no_changes(tmp_path):
    root = checkout(tmp_path)
    commit, changed = provenance.source_commit(root)
    assert commit == git(root, "rev-parse", "HEAD").strip()
    assert changed == []


def test_the_changed_tracked_files_are_named(tmp_path):
    root = checkout(tmp_path)
    (root / "docs" / "runs.json").write_text('[{"seed": 0}]\n')
    (root / "notes.txt").write_text("untracked files do not count\n")
    assert provenance.source_commit(root)[1] == ["docs/runs.json"]
    (root / "hdppo" / "engine.py").write_text("x = 2\n")
    git(root, "add", "hdppo/engine.py")                   # staged changes count too
    assert provenance.source_commit(root)[1] == ["docs/runs.json", "hdppo/engine.py"]


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    assert provenance.source_commit(tmp_path) == (None, [])


def test_a_report_line_says_which_files_differed():
    base = {"commit": "0123456789abcdef", "versions": {"torch": "2.13.0"}, "python": "3.11.7", "cpus": 2}
    assert provenance.describe({**base, "dirty": False, "changed": []}).startswith("commit 0123456789; torch 2.13.0")
    one = provenance.describe({**base, "dirty": True, "changed": ["docs/evidence/t-runs.json"]})
    assert one.startswith("commit 0123456789 with uncommitted changes to docs/evidence/t-runs.json; torch")
    many = provenance.describe({**base, "dirty": True, "changed": ["a.py", "b.py", "c.py", "d.py", "e.py"]})
    assert "with uncommitted changes to a.py, b.py, c.py and 2 more files;" in many
    old = provenance.describe({**base, "dirty": True})          # recorded before the files were kept
    assert old.startswith("commit 0123456789 with uncommitted changes; torch")


def test_the_record_keeps_the_changed_files():
    record = provenance.provenance()
    assert isinstance(record["changed"], list)
    assert record["dirty"] == bool(record["changed"])
