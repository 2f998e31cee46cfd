"""Fine-tuning: `hdppo train ... --load LAYER=RUN` on a layer that is also trained starts that layer
from the other run's weights and trains them (a warm start; `--load` on a layer not trained
freezes it). The transfer study's fine-tuned flat team is made this way."""
from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load_file

from tests.helpers import TINY_CLI
from tests.helpers.cli import cli

FLAT = ["--layer", "all", "--steps", "64", *TINY_CLI]
STATS = ("model.value_mean", "model.value_std")     # value-normalisation buffers: restarted on the new task


def weights(run) -> dict[str, np.ndarray]:
    """The flat team's network parameters in its final checkpoint (no optimizer state, no statistics)."""
    t = load_file(str(run / "checkpoints" / "low" / "tensors.safetensors"))
    return {k: v for k, v in t.items() if k.startswith("model.") and k not in STATS}


def optimizer_steps(run) -> float:
    return float(load_file(str(run / "checkpoints" / "low" / "tensors.safetensors"))["optim.state.0.step"])


def max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def train(capsys, out, *keys, load=None, seed=0) -> None:
    """`hdppo train grid layers=1 KEYS...` (a flat team), from `load`'s weights if given."""
    rc, _, err = cli(capsys, "train", "grid", "layers=1", *keys, *FLAT, "--seed", seed,     # (after TINY_CLI's)
                     *(["--load", f"low={load}"] if load else []), "--out", out)
    assert rc == 0, err


def test_a_loaded_trained_layer_starts_from_the_source_weights_and_trains_them(tmp_path, capsys):
    src = tmp_path / "source"
    train(capsys, src, seed=7)              # another seed: another initialisation than the runs below
    # the second task: another map; a learning rate so small that Adam's steps (about lr each) vanish
    still = tmp_path / "still"
    train(capsys, still, "size=9", "lr=1e-12", load=src)
    scratch = tmp_path / "scratch"
    train(capsys, scratch, "size=9", "lr=1e-12")
    assert max_diff(weights(still), weights(src)) < 1e-9          # the weights it started from are the source's
    assert max_diff(weights(scratch), weights(src)) > 1e-2        # (a fresh network is far from them)
    # at the default learning rate the loaded weights are trained: they move, and stay near the source
    tuned = tmp_path / "tuned"
    train(capsys, tuned, "size=9", load=src)
    moved = max_diff(weights(tuned), weights(src))
    assert moved > 1e-5
    assert moved < max_diff(weights(scratch), weights(src))
    # the optimizer starts fresh (its step count is this run's alone), and the run records what it loaded
    assert optimizer_steps(tuned) == optimizer_steps(scratch) == optimizer_steps(src)
    config = json.loads((tuned / "config.json").read_text())
    assert config["layers"] == ["low"] and config["frozen"] == {"low": str(src / "checkpoints" / "low")}


def test_a_fine_tune_whose_units_observe_otherwise_is_refused_naming_the_part(tmp_path, capsys):
    src = tmp_path / "source"
    train(capsys, src)
    out = tmp_path / "other"
    rc, _, err = cli(capsys, "train", "grid", "layers=1", "n_targets=5", *FLAT, "--load", f"low={src}", "--out", out)
    assert rc == 2 and err.startswith("hdppo: error:") and "Traceback" not in err
    assert "incompatible with layer 'low' here: observation width (own features)" in err
    assert "in the checkpoint" in err and "fix:" in err
    assert not out.exists()
