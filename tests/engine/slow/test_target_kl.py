"""`target_kl` in the engine (the rule itself is tested in tests/test_ppo_math.py): a batch's
epochs end once an epoch's mean approx KL passes it, in experience mode (the server's epochs), sync
gradients mode (the driver's rounds) and async gradients mode (each worker's own minibatches), and
the backends stay bit-identical with it."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.config import LayerConfig
from hdppo.engine.learner import Batch
from hdppo.engine.metrics import read_csv
from tests.helpers.engine import GRID_LAYERS, grid_server, params_of, train


def _batch(server, n: int = 64, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    info = server.info
    obs = rng.normal(size=(n, info.obs_dim)).astype(np.float32)
    actions = rng.integers(int(info.action_space.n), size=n)
    import torch
    with torch.no_grad():
        logp, _, values = server.policy.evaluate(obs, actions, critic_obs=np.tile(obs, 3))
    return Batch(obs=obs, actions=actions, logp=logp.numpy(), values=values.numpy(),
                 advantages=rng.normal(size=n).astype(np.float32), returns=rng.normal(size=n).astype(np.float32),
                 critic_obs=np.tile(obs, 3))


@pytest.mark.parametrize("target, epochs", [("0", 16), ("1e-9", 1)])
def test_experience_mode_stops_after_the_epoch_that_passed_the_target(target, epochs):
    server = grid_server({"target_kl": target, "epochs": "16", "minibatches": "4", "lr": "1e-2"})
    out = server.train([(0, _batch(server))])
    assert out["epochs"] == epochs
    # Adam's step counter says how many minibatch steps were taken
    steps = {int(s["step"]) for s in server.optimizer.state.values()}
    assert steps == {epochs * 4}


def test_a_large_target_keeps_every_epoch_and_changes_nothing():
    a = grid_server({"target_kl": "0", "lr": "1e-2"})
    b = grid_server({"target_kl": "1e9", "lr": "1e-2"})
    assert a.train([(0, _batch(a))])["epochs"] == b.train([(0, _batch(b))])["epochs"] == LayerConfig().epochs
    np.testing.assert_array_equal(a.params(), b.params())


COMMON = dict(steps=1024, workers=2, envs_per_worker=2, seed=3, progress="false", rollout=32, log_every=0,
              epochs=8, minibatches=2, lr="3e-3")


def _epochs_logged(run, layer="low") -> list[float]:
    return [r["epochs"] for r in read_csv(run, layer) if "epochs" in r]


def test_sync_gradients_mode_runs_one_epoch_under_a_tiny_target(tmp_path):
    t = train(tmp_path / "run", ["low"], backend="inline", target_kl="1e-9", **COMMON)
    logged = _epochs_logged(t.out)
    assert logged and set(logged) == {1.0}
    meta = load_checkpoint(t.out / "checkpoints" / "low")[1]
    assert meta["updates"] == len(logged) * 2             # one epoch of 2 minibatch steps per update


def test_sync_gradients_mode_without_a_target_runs_every_epoch(tmp_path):
    t = train(tmp_path / "run", ["low"], backend="inline", target_kl="0", **COMMON)
    logged = _epochs_logged(t.out)
    assert logged and set(logged) == {8.0}
    assert load_checkpoint(t.out / "checkpoints" / "low")[1]["updates"] == len(logged) * 8 * 2


def test_async_gradients_mode_stops_each_workers_batch(tmp_path):
    t = train(tmp_path / "run", ["low"], backend="inline", sync="async", max_staleness="100", target_kl="1e-9",
              **COMMON)
    logged = _epochs_logged(t.out)
    assert logged and set(logged) == {1.0}
    # every worker's batch gave exactly one epoch of 2 minibatch gradients, all applied
    meta = load_checkpoint(t.out / "checkpoints" / "low")[1]
    assert meta["updates"] == len(logged) * 2 and meta["dropped"] == 0


@pytest.mark.slow
def test_inline_and_process_stay_identical_when_epochs_stop_early(tmp_path):
    """A target the updates pass part-way, so the number of epochs differs between updates; both
    backends must make the same decisions and the same parameters."""
    common = {**COMMON, "steps": 2048, "target_kl": "2e-3"}
    a = train(tmp_path / "inline", GRID_LAYERS, backend="inline", **common)
    b = train(tmp_path / "process", GRID_LAYERS, backend="process", **common)
    ea, eb = _epochs_logged(a.out), _epochs_logged(b.out)
    assert ea == eb and len(set(ea)) > 1, ea             # early stops happened, and not on every update
    for layer in GRID_LAYERS:
        pa, pb = params_of(a.out, layer), params_of(b.out, layer)
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k], err_msg=f"{layer}:{k}")
