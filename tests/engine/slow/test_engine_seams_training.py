"""The engine seams in training: an added loss term and a registered mode run through the stage loop
(sync and async), on grid with the inline backend."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.metrics import read_csv
from hdppo.engine.modes import MODES
from tests.helpers.engine import OneStepMode, params_of, train, with_kl_penalty

COMMON = dict(steps=768, workers=2, envs_per_worker=2, seed=5, progress="false", rollout=32, log_every=0,
              epochs=3, minibatches=2, lr="3e-3")

@pytest.mark.parametrize("mode, sync", [("gradients", "sync"), ("gradients", "async"), ("experience", "sync")])
def test_a_kl_penalty_term_changes_training_and_shows_in_the_layer_rows(tmp_path, monkeypatch, mode, sync):
    plain = train(tmp_path / "plain", ["low"], backend="inline", mode=mode, sync=sync, **COMMON)
    with_kl_penalty(monkeypatch, beta=50.0)
    kl = train(tmp_path / "kl", ["low"], backend="inline", mode=mode, sync=sync, **COMMON)
    got = read_csv(kl.out, "low")
    assert got and all(r["loss_kl"] >= 0 for r in got) and any(r["loss_kl"] > 0 for r in got)
    for r in got:                       # the logged total is the sum of the logged loss_* terms
        parts = r["loss_pg"] + r["loss_value"] + r["loss_entropy"] + r["loss_kl"]
        assert r["loss"] == pytest.approx(parts, rel=1e-4, abs=1e-6)
    assert "loss_kl" not in read_csv(plain.out, "low")[0]
    a, b = params_of(plain.out, "low"), params_of(kl.out, "low")
    assert any(not np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("sync", ["sync", "async"])
def test_a_registered_mode_trains_through_the_stage_loop(tmp_path, monkeypatch, sync):
    monkeypatch.setitem(MODES, "one_step", OneStepMode)
    t = train(tmp_path / "run", ["low"], backend="inline", mode="one_step", sync=sync, max_staleness="100",
              **COMMON)
    logged = read_csv(t.out, "low")
    meta = load_checkpoint(t.out / "checkpoints" / "low")[1]
    # one step per batch (sync: per round of the pool's batches; async: per worker's batch), one row each
    batches = meta["env_steps"] // (32 * 2 * (2 if sync == "sync" else 1))
    assert meta["updates"] == len(logged) == batches and meta["dropped"] == 0
    assert all("epochs" not in r and "loss_pg" in r for r in logged)
