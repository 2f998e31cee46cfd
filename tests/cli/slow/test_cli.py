"""Integration tests of the `hdppo` command line: scenarios, check, train (run folders, key=value routing,
--config, --resume, --layer/--schedule, --load) and eval, on the tiny `grid` scenario with the inline backend.

Every run is seeded and tiny; the CLI runs in-process through `hdppo.cli.main`.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from hdppo.cli import main
from tests.helpers import TESTS
from tests.helpers.cli import cli

BAD_GOAL_SPACE = TESTS / "scenarios_broken" / "bad_goal_space.py"
# a fast, seeded training tail: one inline worker, two env copies
FAST = ["--backend", "inline", "--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=2"]
TINY = ["rollout=16", "epochs=1", "minibatches=1"]     # one gradient step per rollout of 16 steps x 2 copies


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def ckpt_meta(run: Path, layer: str) -> dict:
    return read_json(run / "checkpoints" / layer / "meta.json")["meta"]


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and mtime."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")       # rich tables do not wrap names and descriptions


@pytest.fixture(scope="module")
def low_run(tmp_path_factory) -> Path:
    """`hdppo train grid --layer low --steps 2000 ...`: the run the later tests read (never modify)."""
    out = tmp_path_factory.mktemp("low_run") / "run"
    rc = main(["train", "grid", "--layer", "low", "--steps", "2000", "--backend", "inline", "--workers", "1",
               "envs_per_worker=2", "--seed", "0", "--out", str(out), "--no-progress"])
    assert rc == 0
    return out


# ---- scenarios / check ---------------------------------------------------------------------------
def test_scenarios_lists_builtins_with_descriptions(capsys):
    rc, out, _ = cli(capsys, "scenarios")
    assert rc == 0
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 3}
    assert "grid" in lines and "spread" in lines, out
    assert "Tiny numpy grid" in lines["grid"]
    assert "MPE2 simple_spread" in lines["spread"]
    assert "does not load" not in out


def test_check_grid_passes(capsys):
    rc, out, _ = cli(capsys, "check", "grid", "--episodes", "2")
    assert rc == 0
    assert "all checks passed" in out
    assert "FAIL" not in out


def test_check_broken_scenario_fails_naming_the_problem(capsys):
    rc, out, _ = cli(capsys, "check", BAD_GOAL_SPACE)
    assert rc == 1
    assert "FAIL" in out and "some checks failed" in out
    assert "goal_space" in out and "not a Gymnasium space" in out
    assert "fix:" in out


# ---- train: the run folder -----------------------------------------------------------------------
def test_train_writes_a_complete_run_folder(low_run):
    config = read_json(low_run / "config.json")
    assert config["scenario"] == "grid" and config["scenario_name"] == "grid"
    assert config["layers"] == ["low"] and config["frozen"] == {}
    assert config["scenario_overrides"] == {}
    assert config["scenario_config"]["size"] == 7           # grid's defaults, resolved
    train = config["train"]
    assert train["steps"] == 2000 and train["envs_per_worker"] == 2
    assert train["workers"] == 1 and train["backend"] == "inline" and train["progress"] == "lines"
    assert set(train["layers"]) == set(config["layer_names"]) == {"high", "mid", "low"}
    assert train["layers"]["low"]["lr"] == 3e-4                # the LayerConfig default
    assert [s["name"] for s in config["stages"]] == ["concurrent"]

    state = read_json(low_run / "state.json")
    assert state["finished"] is True
    assert state["env_steps"] >= 2000

    ckpt = low_run / "checkpoints" / "low"
    assert (ckpt / "tensors.safetensors").stat().st_size > 0
    meta = ckpt_meta(low_run, "low")
    assert meta["layer"] == "low" and meta["scenario"] == "grid" and meta["stage"] == "concurrent"
    assert meta["version"] > 0 and meta["env_steps"] == state["env_steps"]
    assert not (low_run / "checkpoints" / "mid").exists()       # only trained layers are saved

    run_rows = csv_rows(low_run / "metrics" / "run.csv")
    assert run_rows
    assert {"env_steps", "sps", "team_return", "return/low"} <= set(run_rows[0])
    assert float(run_rows[-1]["env_steps"]) >= 2000
    assert all(float(r["sps"]) > 0 for r in run_rows)

    low_rows = csv_rows(low_run / "metrics" / "low.csv")
    assert len(low_rows) >= 2
    for key in ("approx_kl", "clipfrac", "explained_variance", "grad_cosine_mean", "version", "pg_loss",
                "v_loss", "entropy", "lr"):
        assert key in low_rows[0], key
        assert low_rows[-1][key] != "", key
    versions = [float(r["version"]) for r in low_rows]
    assert versions == sorted(versions) and versions[-1] == meta["version"]
    assert 0.0 <= float(low_rows[-1]["clipfrac"]) <= 1.0
    # one worker: its gradient is the aggregate
    assert float(low_rows[-1]["grad_cosine_mean"]) == pytest.approx(1.0, abs=1e-4)

    events = list((low_run / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0


def test_key_value_overrides_are_routed(tmp_path, capsys):
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--steps", "32", *FAST, "--out", out,
                     "lr=1e-3", "low.rollout=32", "size=5", "epochs=1", "minibatches=1")
    assert rc == 0, err
    config = read_json(out / "config.json")
    layers = config["train"]["layers"]
    assert {name: lc["lr"] for name, lc in layers.items()} == {"high": 1e-3, "mid": 1e-3, "low": 1e-3}
    assert layers["low"]["rollout"] == 32
    assert layers["mid"]["rollout"] == 0 and layers["high"]["rollout"] == 0
    assert config["scenario_overrides"] == {"size": "5"}
    assert config["scenario_config"]["size"] == 5
    assert "size" not in config["train"] and "size" not in layers["low"]
    assert config["train"]["envs_per_worker"] == 2


def test_config_file_and_command_line_wins(tmp_path, capsys):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("steps: 32\n"
                         "lr: 0.002\n"
                         "envs_per_worker: 3\n"
                         "size: 6\n"
                         "low:\n  rollout: 16\n  epochs: 1\n  minibatches: 1\n"
                         "mid:\n  epochs: 2\n")
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--config", yaml_file, "--backend", "inline",
                     "--workers", "1", "--no-progress", "--out", out, "lr=5e-4", "size=5")
    assert rc == 0, err
    config = read_json(out / "config.json")
    train, layers = config["train"], config["train"]["layers"]
    assert train["steps"] == 32 and train["envs_per_worker"] == 3         # from the file
    assert layers["low"]["rollout"] == 16 and layers["mid"]["epochs"] == 2
    assert {lc["lr"] for lc in layers.values()} == {5e-4}                   # the command line wins
    assert config["scenario_config"]["size"] == 5
    assert read_json(out / "state.json")["env_steps"] >= 32


# ---- resume / eval -------------------------------------------------------------------------------
def test_resume_continues_a_finished_run(low_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(low_run, run)
    version0 = ckpt_meta(run, "low")["version"]
    rows0 = csv_rows(run / "metrics" / "low.csv")
    run_rows0 = csv_rows(run / "metrics" / "run.csv")

    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "4000")
    assert rc == 0, err
    state = read_json(run / "state.json")
    assert state["finished"] is True
    assert state["env_steps"] >= 4000
    meta = ckpt_meta(run, "low")
    assert meta["version"] > version0
    assert meta["env_steps"] == state["env_steps"]
    rows = csv_rows(run / "metrics" / "low.csv")
    assert len(rows) > len(rows0)
    assert [r["step"] for r in rows[:len(rows0)]] == [r["step"] for r in rows0]     # appended, not truncated
    assert [r["version"] for r in rows[:len(rows0)]] == [r["version"] for r in rows0]
    assert float(rows[-1]["version"]) == meta["version"]
    assert len(csv_rows(run / "metrics" / "run.csv")) > len(run_rows0)


def test_eval_prints_per_layer_returns_and_success(low_run, capsys):
    before = snapshot(low_run)
    rc, out, err = cli(capsys, "eval", low_run, "--episodes", "5")
    assert rc == 0, err
    assert "(5 episodes" in " ".join(out.split())       # the title may wrap
    for layer in ("low", "mid", "high"):
        assert f"return/{layer}" in out
    assert "return/low (checkpoint)" in out                     # the trained layer plays its checkpoint
    assert "return/mid (uniform)" in out                         # grid's mid layer has no scripted controller
    assert "team return" in out and "episode length" in out
    assert "success rate" in out
    success = next(line for line in out.splitlines() if "success rate" in line)
    mean = float(success.split("│")[2].split()[0])
    assert 0.0 <= mean <= 1.0
    after = snapshot(low_run)
    assert json.loads((Path(low_run) / "eval.json").read_text())["episodes"] == 5
    after.pop("eval.json", None)
    assert after == before                                      # eval writes only RUN/eval.json


# ---- schedules and frozen layers -----------------------------------------------------------------
def test_bottom_up_trains_low_then_mid_then_high(tmp_path, capsys):
    out = tmp_path / "run"
    rc, stdout, err = cli(capsys, "train", "grid", "--layer", "all", "--schedule", "bottom-up", "--steps", "192",
                          *FAST, *TINY, "--out", out)
    assert rc == 0, err
    config = read_json(out / "config.json")
    assert [(s["name"], s["trained"]) for s in config["stages"]] == [
        ("bottom-up:low", ["low"]), ("bottom-up:mid", ["mid"]), ("bottom-up:high", ["high"])]
    assert config["train"]["schedule"] == "bottom-up"
    metas = {layer: ckpt_meta(out, layer) for layer in ("low", "mid", "high")}
    assert {layer: m["stage"] for layer, m in metas.items()} == {
        "low": "bottom-up:low", "mid": "bottom-up:mid", "high": "bottom-up:high"}
    assert all(m["version"] >= 1 for m in metas.values())
    # the stages ran in order: each layer's checkpoint was last written after the one below it
    assert 0 < metas["low"]["env_steps"] < metas["mid"]["env_steps"] < metas["high"]["env_steps"]
    assert stdout.index("stage bottom-up:low") < stdout.index("stage bottom-up:mid") \
        < stdout.index("stage bottom-up:high")
    state = read_json(out / "state.json")
    assert state["finished"] is True and state["env_steps"] == metas["high"]["env_steps"] >= 192


def test_load_freezes_low_while_mid_trains(low_run, tmp_path, capsys):
    low_ckpt = low_run / "checkpoints" / "low"
    before = snapshot(low_ckpt)
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "grid", "--load", f"low={low_ckpt}", "--layer", "mid", "--steps", "64",
                     *FAST, *TINY, "--out", out)
    assert rc == 0, err
    config = read_json(out / "config.json")
    assert config["layers"] == ["mid"]
    assert config["frozen"] == {"low": str(low_ckpt)}
    assert (out / "checkpoints" / "mid" / "meta.json").is_file()
    assert ckpt_meta(out, "mid")["version"] >= 1
    assert not (out / "checkpoints" / "low").exists()
    assert not (out / "checkpoints" / "high").exists()
    assert snapshot(low_ckpt) == before                         # the frozen checkpoint is only read
