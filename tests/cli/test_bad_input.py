"""Bad input to the `hdppo` command line: every case exits 2 with one message that names the problem and
says how to fix it, and leaves whatever was saved before exactly as it was.

The CLI runs in-process through `hdppo.cli.main`; one test runs a real process (process backend) to see
the exit code and stderr a user sees when a worker process meets a NaN.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hdppo.cli import main
from tests.helpers import TESTS
from tests.helpers.cli import cli

NAN_ENV = TESTS / "fixtures" / "broken_env.py"
FAST = ["--backend", "inline", "--workers", "1", "--seed", "0", "--no-progress",
        "envs_per_worker=2", "rollout=16", "epochs=1", "minibatches=1"]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and mtime."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_refused(rc: int, err: str, *names: str) -> None:
    """Exit code 2 and one `hdppo: error:` message naming the problem and a fix, without a traceback
    (after any `hdppo: warning:` lines, e.g. a tiny budget's few-updates warning)."""
    assert rc == 2, err
    err = "\n".join(line for line in err.splitlines() if not line.startswith("hdppo: warning:"))
    assert err.startswith("hdppo: error:"), err
    assert "Traceback" not in err
    low = err.lower()
    for name in names:
        assert name.lower() in low, f"{name!r} not in {err!r}"
    assert "fix" in low, err


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")       # rich tables do not wrap the details


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    """A tiny finished run (grid, low layer); tests copy it or check that it stays untouched."""
    out = tmp_path_factory.mktemp("saved") / "run"
    assert main(["train", "grid", "--layer", "low", "--steps", "32", *FAST, "--out", str(out)]) == 0
    assert (out / "checkpoints" / "low" / "meta.json").is_file()
    return out


@pytest.fixture
def untouched(saved_run):
    """Asserts after the test that nothing in the saved run changed (bytes and mtimes)."""
    before = snapshot(saved_run)
    yield saved_run
    assert snapshot(saved_run) == before


# ---- names and values ----------------------------------------------------------------------------
@pytest.mark.parametrize("args, names", [
    (["--layer", "bogus"], ["no layer 'bogus'", "low"]),
    (["--layer", "low,bogus"], ["no layer 'bogus'"]),
    (["bogus=1"], ["unknown setting 'bogus'", "steps", "lr", "size"]),
    (["lr=abc"], ["'abc'", "'lr'", "not a number"]),
    (["steps=-"], ["'-'", "'steps'", "not an integer"]),
    (["--steps", "1e3.5"], ["'steps'", "not an integer"]),
    (["bogus.lr=1"], ["bogus.lr", "high", "mid", "low"]),
    (["low.bogus=1"], ["layer 'low' has no setting 'bogus'"]),
    (["mode=fast"], ["'fast'", "'mode'", "gradients", "experience"]),
    (["hidden=64,x"], ["'x'", "'hidden'"]),
    (["size=abc"], ["'abc'", "'size'"]),
    (["n_units"], ["'n_units'", "key=value"]),
    (["--load", "low"], ["--load 'low'", "LAYER=PATH"]),
    (["--load", "bogus=somewhere"], ["no layer 'bogus'"]),
])
def test_bad_names_and_values_are_refused_before_any_work(args, names, tmp_path, capsys, untouched):
    out = tmp_path / "new"
    budget = [] if any(a == "--steps" or a.startswith("steps=") for a in args) else ["steps=32"]   # steps once
    rc, stdout, err = cli(capsys, "train", "grid", "--layer", "low", *budget, *FAST, "--out", out, *args)
    assert_refused(rc, err, *names)
    assert not out.exists()                                     # no run folder was started


def test_argparse_choices_exit_2(capsys):
    rc, _, err = cli(capsys, "train", "grid", "--backend", "bogus")
    assert rc == 2
    assert "invalid choice: 'bogus'" in err


@pytest.mark.parametrize("args, names", [
    (["steps=-5"], ["'steps'"]),
    (["envs_per_worker=0"], ["'envs_per_worker'"]),
    (["epochs=0"], ["epochs"]),
    (["target_kl=-0.01"], ["target_kl", ">= 0"]),
    (["target_kl=nan"], ["target_kl"]),
])
def test_out_of_range_values_are_refused(args, names, tmp_path, capsys):
    """A well-formed number outside its range is a config error, not a traceback or an empty run."""
    out = tmp_path / "new"
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "steps=32", *FAST, "--out", out, *args)
    assert_refused(rc, err, *names)
    assert not out.exists()


# ---- run folders ---------------------------------------------------------------------------------
def test_out_of_an_existing_run_is_refused_and_left_alone(capsys, untouched):
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--steps", "32", *FAST, "--out", untouched)
    assert_refused(rc, err, str(untouched), "already exists", "--resume")


def test_out_of_a_folder_with_user_files_is_refused(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    before = snapshot(folder)
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--steps", "32", *FAST, "--out", folder)
    assert_refused(rc, err, "not empty")
    assert snapshot(folder) == before


def test_out_of_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep me")
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--steps", "32", *FAST, "--out", target)
    assert_refused(rc, err, str(target))
    assert target.read_text() == "keep me"


def test_resume_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    before = snapshot(folder)
    rc, _, err = cli(capsys, "train", "--resume", folder)
    assert_refused(rc, err, str(folder), "not an hdppo run folder")
    assert snapshot(folder) == before
    rc, _, err = cli(capsys, "train", "--resume", tmp_path / "missing")
    assert_refused(rc, err, "not an hdppo run folder")
    assert not (tmp_path / "missing").exists()


def test_resume_of_a_run_without_commits_is_refused(saved_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    shutil.rmtree(run / "commits")          # state.json is only a copy; the commits are what --resume reads
    before = snapshot(run)
    rc, _, err = cli(capsys, "train", "--resume", run)
    assert_refused(rc, err, "commit")
    assert snapshot(run) == before


def test_resume_with_a_malformed_steps_is_refused(saved_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    before = snapshot(run)
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "-")
    assert_refused(rc, err, "'steps'")
    assert snapshot(run) == before


def test_eval_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    rc, _, err = cli(capsys, "eval", tmp_path, "--episodes", "2")
    assert_refused(rc, err, str(tmp_path), "not an hdppo run folder")
    assert list(tmp_path.iterdir()) == []
    rc, _, err = cli(capsys, "eval", tmp_path / "missing")
    assert_refused(rc, err, "not an hdppo run folder")


# ---- checkpoints given to --load -----------------------------------------------------------------
def test_load_of_a_checkpoint_with_another_obs_dim_is_refused(tmp_path, capsys, untouched):
    other = tmp_path / "three_targets"
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--steps", "32", *FAST, "n_targets=3",
                     "--out", other)
    assert rc == 0, err
    ckpt = other / "checkpoints" / "low"
    assert json.loads((ckpt / "meta.json").read_text())["meta"]["obs_dim"] == 15
    before = snapshot(other)
    out = tmp_path / "new"
    # as the frozen layer under a trained mid, and as the warm start of a trained low
    for layer in ("mid", "low"):
        rc, _, err = cli(capsys, "train", "grid", "--layer", layer, "--load", f"low={ckpt}", "--steps", "32",
                         *FAST, "--out", out)
        assert_refused(rc, err, str(ckpt), "incompatible", "observation width (own features) 12 in the checkpoint, "
                       "15 here")
        assert not out.exists()
    # a checkpoint of another layer: the low checkpoint given as mid
    rc, _, err = cli(capsys, "train", "grid", "--layer", "low", "--load",
                     f"mid={untouched / 'checkpoints' / 'low'}", "--steps", "32", *FAST, "--out", out)
    assert_refused(rc, err, "incompatible", "observation width", "action space Discrete(5) in the checkpoint, "
                   "Discrete(4) here", "child feature width 0 in the checkpoint, 15 here")
    assert not out.exists()
    assert snapshot(other) == before


def _flip_tensor_bytes(ckpt: Path) -> None:
    path = ckpt / "tensors.safetensors"
    blob = bytearray(path.read_bytes())
    for i in range(len(blob) // 2, len(blob) // 2 + 8):
        blob[i] ^= 0xFF
    path.write_bytes(bytes(blob))


def _truncate_meta(ckpt: Path) -> None:
    path = ckpt / "meta.json"
    path.write_bytes(path.read_bytes()[:60])


@pytest.mark.parametrize("damage, names", [
    (_flip_tensor_bytes, ["corrupt", "sha256"]),
    (_truncate_meta, ["corrupt", "meta.json"]),
    (lambda ckpt: (ckpt / "tensors.safetensors").unlink(), ["tensors.safetensors", "missing"]),
])
@pytest.mark.parametrize("layer", ["mid", "low"])
def test_corrupt_checkpoint_is_refused_at_load(damage, names, layer, saved_run, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(saved_run / "checkpoints" / "low", ckpt)
    damage(ckpt)
    before = snapshot(ckpt)
    out = tmp_path / "new"
    rc, _, err = cli(capsys, "train", "grid", "--layer", layer, "--load", f"low={ckpt}", "--steps", "32",
                     *FAST, "--out", out)
    assert_refused(rc, err, str(ckpt), *names)
    assert not out.exists()                                     # refused before a run folder or worker
    assert snapshot(ckpt) == before


def test_load_of_a_missing_checkpoint(tmp_path, capsys):
    out = tmp_path / "new"
    rc, _, err = cli(capsys, "train", "grid", "--layer", "mid", "--load", f"low={tmp_path / 'nope'}",
                     "--steps", "32", *FAST, "--out", out)
    assert_refused(rc, err, "does not exist", "--load")
    assert not out.exists()


# ---- non-finite env output -----------------------------------------------------------------------
@pytest.mark.parametrize("where", ["reward", "observation"])
def test_check_reports_non_finite_env_output(where, capsys):
    rc, out, _ = cli(capsys, "check", NAN_ENV, f"fault=nan_{where}")
    assert rc == 1
    assert "some checks failed" in out
    fail = [line for line in out.splitlines() if "FAIL" in line]
    assert fail and "non-finite" in fail[0] and f"non-finite {where} to unit 'u1'" in fail[0], out
    assert "episode step 3" in out


def test_check_of_the_nan_scenario_passes_without_nan(capsys):
    rc, out, _ = cli(capsys, "check", NAN_ENV, "fault_step=-1", "--episodes", "2")
    assert rc == 0, out


def test_train_stops_on_a_nan_reward_naming_the_unit(tmp_path, capsys):
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "train", NAN_ENV, "--steps", "200", *FAST, "--out", out)
    assert_refused(rc, err, "non-finite reward", "unit 'u1'", "episode step 3", "broken_env")
    state = json.loads((out / "state.json").read_text())
    assert state["finished"] is False


def test_train_in_worker_processes_stops_on_a_nan_observation(tmp_path):
    """A real `hdppo` process with the process backend: the worker's error reaches stderr and exit code 2."""
    out = tmp_path / "run"
    env = dict(os.environ, COLUMNS="300")
    proc = subprocess.run(
        [sys.executable, "-m", "hdppo.cli", "train", str(NAN_ENV), "fault=nan_observation", "--steps", "200",
         "--backend", "process", "--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=2",
         "--out", str(out)],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "hdppo: error:" in proc.stderr
    assert "worker 0" in proc.stderr
    assert "non-finite observation to unit 'u1'" in proc.stderr
    assert "fix" in proc.stderr


def test_an_action_mask_on_a_non_discrete_action_space_is_refused_naming_the_fix():
    """Masks apply to Discrete action spaces; a masked MultiDiscrete env used to crash on its first reset."""
    import gymnasium as gym
    from pettingzoo import ParallelEnv

    from hdppo.errors import ScenarioError
    from hdppo.sims.pettingzoo import PettingZooBatch

    class Masked(ParallelEnv):
        metadata = {"name": "masked"}
        possible_agents = ["a_0", "a_1"]

        def observation_space(self, agent):
            return gym.spaces.Dict({"observation": gym.spaces.Box(-1, 1, (3,)),
                                    "action_mask": gym.spaces.Box(0, 1, (4,), dtype=np.int8)})

        def action_space(self, agent):
            return gym.spaces.MultiDiscrete([2, 2])

    with pytest.raises(ScenarioError) as info:
        PettingZooBatch(Masked, ["a_0", "a_1"], n_envs=1)
    assert "action_mask" in info.value.problem and "MultiDiscrete" in info.value.problem
    assert "Discrete action space" in info.value.fix
