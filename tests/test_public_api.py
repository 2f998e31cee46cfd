"""The public API (`hdppo.X`), the Python entry point `hdppo.train`, and the module paths from before
the team/engine/tools layout, which scenario files written against the old docs still import."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import hdppo
from hdppo import _legacy
from hdppo.team.check import run_check

LEGACY = Path(__file__).resolve().parent / "scenarios_legacy"


def test_every_public_name_resolves_to_its_home() -> None:
    assert sorted(hdppo.__all__) == sorted(dir(hdppo))
    for name in hdppo.__all__:
        obj = getattr(hdppo, name)
        assert getattr(obj, "__name__", name) == name
        assert obj.__module__.startswith("hdppo."), (name, obj.__module__)
    with pytest.raises(AttributeError, match="no attribute 'Scenarios'"):
        _ = hdppo.Scenarios


def test_importing_hdppo_stays_light() -> None:
    code = "import sys, hdppo; from hdppo import Scenario, Layer, AgentGraph; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("old", sorted(_legacy.MOVED))
def test_an_old_module_path_is_the_moved_module_itself(old: str) -> None:
    if old.endswith(("bench_rllib", "backends")) or old in ("hdppo.tools.bench_rllib",):
        pytest.importorskip("ray")
    assert importlib.import_module(old) is importlib.import_module(_legacy.MOVED[old])


def test_old_submodule_paths_and_from_imports_work() -> None:
    from hdppo.backends.inline import InlineBackend  # a module under a moved package
    from hdppo.engine.backends.inline import InlineBackend as new
    assert InlineBackend is new
    assert _legacy.new_path("hdppo.backends.ray") == "hdppo.engine.backends.ray"
    assert _legacy.new_path("hdppo.cli") is None


def test_python_dash_m_runs_a_moved_tool_by_its_old_name() -> None:
    out = subprocess.run([sys.executable, "-m", "hdppo.netcost", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usage:" in out.stdout and "crosses the network" in out.stdout, out.stderr


@pytest.mark.parametrize("name", ["line.py", "grid_native.py"])
def test_scenario_files_written_against_the_old_docs_still_check(name: str) -> None:
    """Verbatim copies of examples/scenarios/line.py and scenarios/grid.py as they were before the move
    (`from hdppo.scenario import ...`, `hdppo.graph`, `hdppo.vecenv`, `hdppo.batch_view`, `hdppo.render`)."""
    text = (LEGACY / name).read_text()
    assert "from hdppo.scenario import" in text and "from hdppo.graph import" in text
    report = run_check(str(LEGACY / name), {}, episodes=2, n_envs=2, seed=0)
    assert report.ok, [(line.name, line.detail) for line in report.lines if not line.ok]


def test_train_takes_typed_values_and_returns_the_run_folder(tmp_path: Path) -> None:
    run = hdppo.train("grid", {"steps": 512, "workers": 1, "backend": "inline", "envs_per_worker": 2, "seed": 3,
                               "low.lr": 1e-3}, layers="low", out=tmp_path / "run")
    assert run == tmp_path / "run"
    config = json.loads((run / "config.json").read_text())
    assert config["layers"] == ["low"] and config["train"]["steps"] == 512 and config["train"]["seed"] == 3
    assert config["train"]["layers"]["low"]["lr"] == 1e-3 and config["train"]["progress"] is False
    assert (run / "checkpoints" / "low").exists()
    team = hdppo.load(run)
    assert team is not None


def test_run_spec_resolves_once_and_names_a_bad_layer() -> None:
    spec = hdppo.RunSpec.from_overrides("grid", {"steps": 1000, "size": 9}, layers="low,mid")
    assert spec.layers == ["low", "mid"] and spec.scenario_overrides == {"size": 9}
    assert spec.resolved is not None and spec.resolved.config.size == 9
    assert spec.resolved.layer_names == ["high", "mid", "low"]
    with pytest.raises(hdppo.errors.ConfigError, match="has no layer 'top'"):
        hdppo.RunSpec.from_overrides("grid", {}, layers=["top"])
