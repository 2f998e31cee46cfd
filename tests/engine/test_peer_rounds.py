"""Peer rounds (hdppo/engine/peers.py): the process workers step replicas of the server among
themselves and must end where the server's own rounds end, bit for bit, weights and Adam's state."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.messages import GradResult
from hdppo.engine.modes import GradientsMode
from hdppo.engine.peers import ENV_SWITCH, PeerBlocks
from tests.helpers.engine import GRID_LAYERS, grid_server, train


def _grad(server, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(server.n_params).astype(np.float32)


def _two_servers():
    """grid's low-layer server twice, the second with other weights."""
    a, b = grid_server(), grid_server()
    with torch.no_grad():
        for p in b.policy.parameters():
            p.add_(1.0)
    assert not np.array_equal(a.params(), b.params())
    return a, b


def test_a_server_that_adopts_another_s_state_steps_exactly_like_it():
    a, b = _two_servers()
    fresh = b.adam_state()
    assert fresh is not None and fresh[2] == 0.0 and not fresh[0].any() and not fresh[1].any()
    for i in range(3):
        a.apply_async(GradResult("low", 0, a.version, 8, _grad(a, i), {}))
    state = a.adam_state()
    assert state is not None
    b.adopt(a.params(), *state, a.version, 0, {})
    assert b.version == a.version
    for i in range(3, 6):
        a.apply_async(GradResult("low", 0, a.version, 8, _grad(a, i), {}))
        b.apply_async(GradResult("low", 0, b.version, 8, _grad(b, i), {}))
    np.testing.assert_array_equal(a.params(), b.params())
    sa, sb = a.adam_state(), b.adam_state()
    assert sa is not None and sb is not None and sa[2] == 6.0
    for x, y in zip(sa, sb):
        np.testing.assert_array_equal(x, y)


def test_adopting_a_state_before_any_step_leaves_adam_to_start_as_torch_does():
    a, b = _two_servers()
    state = a.adam_state()
    assert state is not None
    b.adopt(a.params(), *state, a.version, 0, {})
    assert not b.optimizer.state                         # torch makes the state at the first step
    a.apply_async(GradResult("low", 0, a.version, 8, _grad(a, 0), {}))
    b.apply_async(GradResult("low", 0, b.version, 8, _grad(b, 0), {}))
    np.testing.assert_array_equal(a.params(), b.params())


def test_exchange_gives_every_worker_the_pool_s_gradients_and_loss_terms_in_pool_order():
    blocks = PeerBlocks(2, {"low": 5})
    try:
        barrier = threading.Barrier(2)
        mine = {0: GradResult("low", 0, 3, 0, None, {}),                 # an empty minibatch: no gradient
                1: GradResult("low", 1, 3, 7, np.arange(5, dtype=np.float32), {"loss": 0.25, "approx_kl": 1e-3},
                              0.0, -2.5)}
        seen: dict[int, list[GradResult]] = {}

        def run(w: int) -> None:
            seen[w] = blocks.exchange("low", w, [0, 1], 0, mine[w], barrier, 10.0)

        threads = [threading.Thread(target=run, args=(w,)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in (0, 1):
            first, second = seen[w]
            assert (first.worker, first.n, first.grad, first.stats) == (0, 0, None, {})
            assert (second.worker, second.n, second.raw_reward_mean) == (1, 7, -2.5)
            assert second.stats == {"loss": 0.25, "approx_kl": 1e-3}
            np.testing.assert_array_equal(second.grad, np.arange(5, dtype=np.float32))
    finally:
        blocks.close()


def test_a_peer_that_never_arrives_ends_the_wait_with_a_clear_error():
    blocks = PeerBlocks(2, {"low": 3})
    try:
        g = GradResult("low", 0, 0, 1, np.ones(3, np.float32), {"loss": 1.0})
        with pytest.raises(TimeoutError, match=r"failed or gave no gradient within 0\.2 s"):
            blocks.exchange("low", 0, [0, 1], 0, g, threading.Barrier(2), 0.2)
    finally:
        blocks.close()


def _column(csv: Path, name: str) -> int:
    return csv.read_text().splitlines()[0].split(",").index(name)


def _tensors(run: Path) -> dict[str, dict[str, torch.Tensor]]:
    return {layer: load_checkpoint(run / "checkpoints" / layer)[0] for layer in GRID_LAYERS}


@pytest.mark.long(30)
def test_peer_rounds_end_where_the_server_s_rounds_end(tmp_path, monkeypatch):
    """Three layers on two processes: `low` and `mid` in peer rounds, `high` (a pool of one worker)
    in the server's rounds; target_kl stops some updates' epochs early. The same run with peer rounds
    turned off gives the same weights and Adam state, tensor for tensor."""
    peer_updates: list[str] = []
    real = GradientsMode.peer_update

    def counted(self, peers, adam):
        peer_updates.append(self.name)
        return real(self, peers, adam)

    monkeypatch.setattr(GradientsMode, "peer_update", counted)
    common = dict(steps=1500, workers=2, envs_per_worker=2, seed=3, progress="false", rollout=32, epochs=4,
                  minibatches=2, target_kl=1e-4, backend="process", **{"high.pool": 1})
    peer = train(tmp_path / "peer", GRID_LAYERS, **common)
    assert set(peer_updates) == {"mid", "low"}, peer_updates
    epochs = np.loadtxt(peer.out / "metrics" / "mid.csv", delimiter=",", skiprows=1,
                        usecols=_column(peer.out / "metrics" / "mid.csv", "epochs"))
    assert epochs.min() < 4, epochs                    # target_kl ended some of mid's peer updates early
    monkeypatch.setenv(ENV_SWITCH, "0")
    peer_updates.clear()
    server = train(tmp_path / "server", GRID_LAYERS, **common)
    assert peer_updates == []
    a, b = _tensors(peer.out), _tensors(server.out)
    for layer in GRID_LAYERS:
        assert a[layer].keys() == b[layer].keys()
        assert any(k.startswith("optim.") for k in a[layer]), "Adam's state is in the checkpoint"
        for k in a[layer]:
            assert torch.equal(a[layer][k], b[layer][k]), f"{layer}:{k}"
    for layer in GRID_LAYERS:
        ma, mb = (load_checkpoint(run.out / "checkpoints" / layer)[1] for run in (peer, server))
        assert (ma["version"], ma["updates"]) == (mb["version"], mb["updates"]) and ma["updates"] > 0


def test_adam_state_is_none_when_parameters_are_at_different_steps():
    """Experience mode's backward can leave a parameter without a gradient, so torch's Adam skips it:
    one step count cannot describe that state, and the layer keeps the server's rounds."""
    a = grid_server()
    first, *rest = a._trainable
    for p in rest:
        p.grad = torch.ones_like(p)
    a.optimizer.step()                        # `first` has no gradient: no state, step 0
    assert first not in a.optimizer.state
    assert a.adam_state() is None


def test_without_shared_memory_for_peer_rounds_the_run_warns_and_uses_the_server_s_rounds(tmp_path, monkeypatch):
    """A container's small /dev/shm must not stop a run that worked before peer rounds existed."""
    from hdppo.engine.backends import process

    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(process, "PeerBlocks", no_room)
    with pytest.warns(UserWarning, match="peer rounds are off: no shared memory"):
        run = train(tmp_path / "run", ["low"], steps=256, workers=2, envs_per_worker=2, rollout=16, epochs=1,
                    minibatches=1, seed=0, progress="off", backend="process")
    assert load_checkpoint(run.out / "checkpoints" / "low")[1]["updates"] > 0
