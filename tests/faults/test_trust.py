"""A run folder never runs the Python it carries unless the user says so (issue 25, item 5).

The attack: a run folder whose config.json says `"scenario": "scenario.py"` and whose own
`RUN/scenario.py` has an extra line. Before, `hdppo eval`, `export`, `render`, `diagnose`,
`hdppo.load` and `--resume` all ran that line without a word. Now the run's copy runs only with
`--trust-run` (`trust_run=True`); without it the command is one line naming the file and the fix.
A run made from a scenario file still works from any folder while that file is where it was, with
the content it had at train time; otherwise it needs `--trust-run`, or the file passed with
`--scenario PATH`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, TINY_CLI
from tests.helpers.cli import cli

TINY_TRAIN = TINY_CLI


pytestmark = pytest.mark.usefixtures("wide_console")      # rich tables keep one line per row


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory) -> Path:
    from hdppo.cli import main
    out = tmp_path_factory.mktemp("trust") / "run"
    assert main(["train", "grid", *TINY_TRAIN, "--steps", "256", "--out", str(out)]) == 0
    return out


def hostile(src: Path, dst: Path, marker: Path, how: str = "copy") -> Path:
    """A copy of `src` that carries code: RUN/scenario.py (grid plus a line that leaves `marker`),
    named by config.json as the run's scenario."""
    run = shutil.copytree(src, dst, symlinks=True)
    code = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
            "from hdppo.scenarios.grid import SCENARIO  # noqa: E402,F401\n")
    config = json.loads((run / "config.json").read_text())
    if how == "project":                 # a ./scenarios/grid.py inside the folder, found from within it
        (run / "scenarios").mkdir()
        (run / "scenarios" / "grid.py").write_text(code)
    else:
        (run / "scenario.py").write_text(code)
        config["scenario"] = "scenario.py"
        if how == "recorded":            # with a record that vouches for the edited copy
            import hashlib
            (run / "scenario_source.json").write_text(json.dumps(
                {"path": str((run / "scenario.py").resolve()),
                 "sha256": hashlib.sha256((run / "scenario.py").read_bytes()).hexdigest()}))
    (run / "config.json").write_text(json.dumps(config))
    return run


COMMANDS = {
    "eval": lambda run, tmp: ["eval", run, "--episodes", "1"],
    "export": lambda run, tmp: ["export", run, "--format", "torchscript", "--out", tmp / "export"],
    "render": lambda run, tmp: ["render", run, "--out", tmp / "episode.gif", "--max-steps", "3"],
    "diagnose": lambda run, tmp: ["diagnose", run, "--steps", "4", "--out", tmp / "diagnose"],
    "resume": lambda run, tmp: ["train", "--resume", run, "--steps", "320"],
}


def assert_untrusted(rc: int, err: str, file: Path, marker: Path) -> None:
    assert not marker.exists(), "the run folder's own code ran"
    assert rc == 2 and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("hdppo: error:")]
    assert len(errors) == 1 and str(file) in errors[0], err
    assert "--trust-run" in err and "fix:" in err, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_run_folders_own_code_needs_trust_run(command, grid_run, tmp_path, capsys):
    marker = tmp_path / "ran"
    run = hostile(grid_run, tmp_path / "run", marker)
    rc, _, err = cli(capsys, *COMMANDS[command](run, tmp_path))
    assert_untrusted(rc, err, run / "scenario.py", marker)
    rc, _, err = cli(capsys, *COMMANDS[command](run, tmp_path), "--trust-run")
    assert rc == 0 and marker.exists(), err              # said so: it runs


def test_load_needs_trust_run_for_the_runs_own_code(grid_run, tmp_path):
    import hdppo
    from hdppo.errors import HdppoError
    marker = tmp_path / "ran"
    run = hostile(grid_run, tmp_path / "run", marker)
    with pytest.raises(HdppoError) as caught:
        hdppo.load(run)
    assert not marker.exists() and str(run / "scenario.py") in caught.value.problem
    assert "trust_run=True" in caught.value.fix
    assert hdppo.load(run, trust_run=True).units and marker.exists()


@pytest.mark.parametrize("how", ["recorded", "project"])
def test_no_record_or_folder_layout_makes_the_copy_trusted(how, grid_run, tmp_path, capsys, monkeypatch):
    """A scenario_source.json vouching for the copy, or a ./scenarios/grid.py inside the folder found
    by name from within it: still the folder's own code."""
    marker = tmp_path / "ran"
    run = hostile(grid_run, tmp_path / "run", marker, how)
    monkeypatch.chdir(run)
    rc, _, err = cli(capsys, "eval", ".", "--episodes", "1")
    file = Path("scenario.py") if how == "recorded" else Path("scenarios") / "grid.py"
    assert not marker.exists(), "the run folder's own code ran"
    assert rc == 2 and "Traceback" not in err and str(file) in err and "--trust-run" in err, err


@pytest.fixture(scope="module")
def file_run(tmp_path_factory) -> tuple[Path, Path]:
    """A run trained on a scenario file given by path (examples' line.py, copied)."""
    from hdppo.cli import main
    base = tmp_path_factory.mktemp("file")
    src = base / "work" / "myline.py"
    src.parent.mkdir()
    shutil.copyfile(ROOT / "examples" / "scenarios" / "line.py", src)
    out = base / "run"
    assert main(["train", str(src), *TINY_TRAIN, "--steps", "200", "--out", str(out)]) == 0
    return src, out


def test_a_file_run_works_from_anywhere_while_its_file_is_unchanged(file_run, tmp_path, capsys, monkeypatch):
    src, run = file_run
    record = json.loads((run / "scenario_source.json").read_text())
    assert record["path"] == str(src.resolve()) and len(record["sha256"]) == 64
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "eval", run, "--episodes", "2", "--json")
    assert rc == 0, err
    assert json.loads(out)["episodes"] == 2


@pytest.mark.parametrize("change", ["edited", "gone"])
def test_a_file_run_whose_file_changed_needs_trust_or_a_path(change, file_run, tmp_path, capsys, monkeypatch):
    src, original = file_run
    work = tmp_path / "work"
    shutil.copytree(src.parent, work)
    run = shutil.copytree(original, tmp_path / "run", symlinks=True)
    moved = work / src.name                         # the file, as the user still has it elsewhere
    record = json.loads((run / "scenario_source.json").read_text())
    marker = tmp_path / "ran"
    target = Path(record["path"])
    saved = target.read_bytes()
    try:
        if change == "edited":                      # the original now holds other code: not run either
            target.write_bytes(saved + f"\nimport pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n".encode())
        else:
            target.unlink()
        monkeypatch.chdir(tmp_path)
        rc, _, err = cli(capsys, "eval", run, "--episodes", "1")
        assert_untrusted(rc, err, run / "scenario.py", marker)
        assert str(target) in err                   # and it says what happened to the original
        rc, _, err = cli(capsys, "eval", run, "--episodes", "1", "--trust-run")      # the run's copy
        assert rc == 0 and not marker.exists(), err
        rc, _, err = cli(capsys, "eval", run, "--episodes", "1", "--scenario", moved)   # a file the user names
        assert rc == 0, err
        rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "264")
        assert_untrusted(rc, err, run / "scenario.py", marker)
        rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "264", "--trust-run")
        assert rc == 0, err
    finally:
        target.write_bytes(saved)
