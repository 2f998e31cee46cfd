"""Divergence stops a run: `lr=1e30` makes the loss, gradients or weights non-finite within a few
updates; the run exits 2 with one line naming the layer and the update, and no commit holds a
non-finite tensor. A checkpoint that does hold one (written by hand here) is refused by eval,
export, hdppo.load and --resume, naming the file and the layer.

On the code before these checks the run exited 0 with every committed weight NaN, and each of
the four readers accepted the poisoned checkpoint."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import hdppo
from hdppo.engine.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from hdppo.engine.commit import list_commits, open_commit
from tests.helpers.cli import cli

TINY = ["--seed", "0", "--no-progress", "--backend", "inline", "--workers", "1", "envs_per_worker=2", "rollout=16",
        "epochs=1", "minibatches=1"]


def all_finite(run: Path) -> dict[str, bool]:
    """Every tensor of every commit's every layer, read without hdppo's own checks: finite?"""
    out = {}
    for n in list_commits(run):
        c = open_commit(run, n)
        for layer in c.layers:
            tensors = load_file(str(c.layer_dir(layer) / "tensors.safetensors"))
            out[f"{n}/{layer}"] = all(np.isfinite(t).all() for t in tensors.values() if t.dtype.kind == "f")
    return out


@pytest.mark.parametrize("mode", [[], ["mode=experience"], ["sync=async"], ["--backend", "process", "--workers", "2"]],
                         ids=["gradients", "experience", "async", "gradients-peer-rounds"])
def test_a_diverging_run_stops_naming_the_layer_and_update(mode, tmp_path, capsys):
    run = tmp_path / "run"
    rc, out, err = cli(capsys, "train", "grid", "--layer", "all", *TINY, *mode, "--steps", "3000", "lr=1e30",
                       "checkpoint_every=1", "--out", run)
    assert rc == 2, out + err
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.startswith("hdppo: error:")]
    assert len(lines) == 1 and "diverged at update" in lines[0] and "layer '" in lines[0], err
    assert "non-finite" in lines[0] or "nan" in lines[0] or "inf" in lines[0], err
    assert "lower lr" in err
    finite = all_finite(run)
    assert finite and all(finite.values()), finite               # nothing non-finite was ever committed
    assert json.loads((run / "state.json").read_text())["finished"] is False


@pytest.fixture
def poisoned(tmp_path) -> Path:
    """A tiny trained run whose newest commit's `low` weights hold a NaN, with a matching manifest."""
    run = Path(hdppo.train("grid", {"steps": 256, "backend": "inline", "workers": 1, "envs_per_worker": 2,
                                    "rollout": 16, "epochs": 1, "minibatches": 1, "seed": 0, "progress": False},
                           layers="low", out=tmp_path / "run"))
    commit = open_commit(run, list_commits(run)[-1])
    layer = commit.layer_dir("low")
    tensors, meta = load_checkpoint(layer)
    key = next(k for k in tensors if k.startswith("model."))
    tensors[key] = tensors[key].clone()
    tensors[key].view(-1)[0] = float("nan")
    save_checkpoint(layer, tensors, meta)
    manifest_path = commit.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for name in ("tensors.safetensors", "meta.json"):
        manifest["files"][f"low/{name}"] = hashlib.sha256((layer / name).read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return run


def refused(text: str) -> bool:
    return ("non-finite" in text and "layer 'low'" in text and "tensors.safetensors" in text
            and "Traceback" not in text)


def test_a_checkpoint_with_non_finite_tensors_is_refused_everywhere(poisoned, tmp_path, capsys):
    with pytest.raises(CheckpointError) as info:
        hdppo.load(poisoned)
    assert refused(str(info.value)), info.value
    for args in (["eval", poisoned, "--episodes", "1"], ["export", poisoned, "--out", tmp_path / "export"],
                 ["train", "--resume", poisoned, "--steps", "512"]):
        rc, out, err = cli(capsys, *args)
        assert rc == 2 and refused(err), (args, out, err)
        assert len([line for line in err.splitlines() if line.startswith("hdppo: error:")]) == 1, err
