"""A user's own project: a folder with its own scenarios/ and policies/, as the docs tell users to work.

hdppo installs nothing at the top level but `hdppo`, so those folders never collide with it; `hdppo
scenarios` lists ./scenarios/*.py beside the built-ins and `hdppo train NAME` finds ./scenarios/NAME.py
first. Every check runs in a fresh interpreter whose working directory is the project."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

LINE = ROOT / "examples" / "scenarios" / "line.py"


def run(cwd: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "hdppo.cli", *args]
    env = {**os.environ, "COLUMNS": "200"}          # rich tables keep one line per scenario
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """scenarios/line_team.py (a scenario importing a helper next
    to it through the project's own `scenarios` package), scenarios/spread/__init__.py shadowing a built-in,
    and a policies/ package of the user's own."""
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "__init__.py").write_text("")
    (tmp_path / "scenarios" / "line_team.py").write_text(
        LINE.read_text().replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom scenarios._helpers import TAG\n")
        + "\nSCENARIO.description = TAG\n")
    (tmp_path / "scenarios" / "_helpers.py").write_text("TAG = 'from the project helpers'\n")
    (tmp_path / "scenarios" / "spread.py").write_text(
        LINE.read_text().replace('name="line"', 'name="my_spread"'))
    pkg = tmp_path / "scenarios" / "line_pkg"          # a scenario folder: __init__.py + a module beside it
    pkg.mkdir()
    (pkg / "__init__.py").write_text(LINE.read_text().replace(
        "from __future__ import annotations\n", "from __future__ import annotations\n\nfrom .extra import NAME\n")
        .replace('name="line"', "name=NAME"))
    (pkg / "extra.py").write_text("NAME = 'line_from_a_folder'\n")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "policies" / "custom.py").write_text("X = 1\n")
    return tmp_path


def test_the_package_imports_beside_a_projects_own_policies_and_scenarios(project: Path) -> None:
    code = ("import importlib.util, hdppo.engine.learner, hdppo.policies, policies, scenarios\n"
            "from hdppo.team.scenario import load_scenario\n"
            "assert policies.MINE and hdppo.policies.make_policy\n"
            "assert load_scenario('skirmish').name == 'skirmish'\n"
            "print('ok')")
    out = run(project, code=code)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_installing_hdppo_adds_no_top_level_scenarios_or_policies(tmp_path: Path) -> None:
    code = ("import importlib.util, hdppo, hdppo.scenarios, hdppo.policies\n"
            "print(importlib.util.find_spec('scenarios'), importlib.util.find_spec('policies'))")
    out = run(tmp_path, code=code)
    assert out.returncode == 0 and out.stdout.strip() == "None None", out.stdout + out.stderr


def test_hdppo_scenarios_lists_the_projects_scenarios_first(project: Path) -> None:
    out = run(project, "scenarios")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if "│" in line]
    names = [n for n in (line.split("│")[1].strip() for line in lines) if n]
    assert names[:3] == ["line_pkg", "line_team", "spread"]
    assert {"skirmish", "grid", "warehouse"} <= set(names[3:]) and "spread" not in names[3:]
    assert "./scenarios/line_team.py" in out.stdout and "from the project" in out.stdout
    assert "./scenarios/line_pkg/" in out.stdout


def test_train_finds_the_projects_scenario_before_the_built_in(project: Path) -> None:
    # process workers load the scenario by its recorded path, in fresh interpreters
    out = run(project, "train", "spread", "--layer", "all", "--steps", "400", "--backend", "process",
              "--workers", "1", "--no-progress", "--out", "runs/mine", "envs_per_worker=2")
    assert out.returncode == 0, out.stderr
    config = json.loads((project / "runs" / "mine" / "config.json").read_text())
    assert config["scenario_name"] == "my_spread"
    assert Path(config["scenario"]) == (project / "scenarios" / "spread.py").resolve()
    # the run is usable from any folder: eval re-loads the project's file by its recorded path
    ev = run(project.parent, "eval", str(project / "runs" / "mine"), "--episodes", "2")
    assert ev.returncode == 0, ev.stderr


def test_an_unknown_name_says_where_scenarios_are_looked_for(project: Path) -> None:
    out = run(project, "train", "nope")
    assert out.returncode == 2, out.stderr
    assert "there is no scenario named 'nope'" in out.stderr and "./scenarios/nope.py" in out.stderr
    assert "line_team" in out.stderr and "skirmish" in out.stderr


def test_a_scenario_folder_and_a_helper_import_load_in_process_workers(project: Path) -> None:
    out = run(project, "train", "line_team", "--steps", "200", "--backend", "process", "--workers", "1",
              "--no-progress", "--out", "runs/team", "envs_per_worker=2")
    assert out.returncode == 0, out.stderr
    code = "from hdppo import load_scenario; print(load_scenario('line_pkg').name)"
    got = run(project, code=code)
    assert got.returncode == 0 and got.stdout.strip() == "line_from_a_folder", got.stderr
