"""The public API (`hdppo.X`, `hdppo.sims.X`) and the Python entry point `hdppo.train`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hdppo


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


def test_train_takes_typed_values_and_returns_the_run_folder(tmp_path: Path, tiny: dict) -> None:
    run = hdppo.train("grid", {**tiny, "steps": 512, "seed": 3, "low.lr": 1e-3}, layers="low", out=tmp_path / "run")
    assert run == tmp_path / "run"
    config = json.loads((run / "config.json").read_text())
    assert config["layers"] == ["low"] and config["train"]["steps"] == 512 and config["train"]["seed"] == 3
    assert config["train"]["layers"]["low"]["lr"] == 1e-3 and config["train"]["progress"] == "off"
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


def test_scenarios_and_policies_live_at_the_top_and_import_inside_the_package() -> None:
    """hdppo/scenarios and hdppo/policies are symlinks to the top-level folders (docs/architecture.md)."""
    import hdppo.policies
    import hdppo.scenarios
    root = Path(__file__).resolve().parents[1]
    for name, module in (("scenarios", hdppo.scenarios), ("policies", hdppo.policies)):
        link = root / "hdppo" / name
        assert link.is_symlink() and link.resolve() == root / name
        assert Path(module.__file__).resolve().parent == root / name
