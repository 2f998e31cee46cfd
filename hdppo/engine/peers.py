"""Peer rounds: a sync gradients update run by the process workers among themselves.

In the server's rounds every (epoch, minibatch) goes worker -> driver -> worker: each worker sends its
gradient through a pipe, the driver's `ParameterServer.apply` steps, publishes, and answers the next
call. In peer rounds the driver hands the layer's optimizer state to the workers once per update
(`PeerBlocks.hand_out`, beside the parameters they already read), makes one `peer_update` call, and
each worker then steps its own replica of the server on the pool's gradients, exchanged here in
shared memory with one barrier a round; the first worker of the pool hands the result back
(`hand_back`, read by `take_back`). Every replica runs the server's own `apply` on the same float32
gradients in the same order, so the weights and Adam's state equal those of the server's rounds bit
for bit (tests/engine/test_peer_rounds.py), without the driver's apply, publish and two pipe trips on
every round's critical path.

The process backend makes them (`ProcessBackend.peers`) and `GradientsMode.update` uses them for a
sync layer whose pool is every worker; `HDPPO_PEER_ROUNDS=0` turns them off (the server's rounds).
Slots alternate between two sets by round, so a worker that is one round ahead never overwrites a
gradient its peer has yet to read.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

import numpy as np

from hdppo.engine.messages import GradResult
from hdppo.engine.params import _attach, _release

if TYPE_CHECKING:
    from hdppo.engine.server import ParameterServer

ENV_SWITCH = "HDPPO_PEER_ROUNDS"
MAX_TERMS = 64          # loss terms a gradient's stats may have (PPO reports about a dozen)
META = 3                # per slot, before the terms: samples, raw reward mean, 1.0 when it has a gradient
HEADER = 4              # float64: Adam's step, the parameter version, spare
KEYS = 2048             # bytes per slot for the loss terms' names (comma-joined UTF-8)


def peer_rounds_enabled() -> bool:
    """False when the environment says HDPPO_PEER_ROUNDS=0 (or false/off/no)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "off", "no")


@dataclass
class PeerResult:
    """A worker's answer to `peer_update`: the update's rows (every worker computes the same ones),
    the server counters its replica moved, and the worker's own seconds in gradients and steps."""

    rows: list[dict]
    updates: int
    staleness: dict[int, int]
    compute_seconds: float
    apply_seconds: float
    epochs_run: int
    error: tuple[str, str] | None = None        # (problem, fix) of a DivergenceError the replica raised


class PeerBlocks:
    """Shared memory for peer rounds, one block per layer: a float64 header (Adam's step, version),
    two sets of per-worker float64 meta and loss terms, two sets of per-worker float32 gradients, and
    the float32 parameters and Adam moments handed between the driver and the workers."""

    def __init__(self, n_workers: int = 0, sizes: dict[str, int] | None = None,
                 names: dict[str, tuple[str, int, int]] | None = None) -> None:
        self._owner = names is None
        self._blocks: dict[str, shared_memory.SharedMemory] = {}
        self._n: dict[str, int] = {}
        self.n_workers = n_workers
        if names is None:
            try:
                for layer, n in (sizes or {}).items():
                    self._blocks[layer] = shared_memory.SharedMemory(create=True, size=self._size(n_workers, n))
                    self._n[layer] = n
            except OSError:
                self.close()            # free the blocks made before the one that failed
                raise
        else:
            for layer, (name, n, workers) in names.items():
                self._blocks[layer] = _attach(name)
                self._n[layer], self.n_workers = n, workers

    @staticmethod
    def _size(workers: int, n: int) -> int:
        return 8 * (HEADER + 2 * workers * (META + MAX_TERMS)) + 4 * (2 * workers * n + 3 * n) + 2 * workers * KEYS

    def names(self) -> dict[str, tuple[str, int, int]]:
        """What a worker process needs to attach: layer -> (block name, parameter count, workers)."""
        return {k: (b.name, self._n[k], self.n_workers) for k, b in self._blocks.items()}

    def _views(self, layer: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(header [HEADER], meta [2, W, META + MAX_TERMS], grads [2, W, n], state [3, n]: parameters,
        exp_avg, exp_avg_sq, keys [2, W, KEYS] bytes) of a layer's block."""
        buf, n, w = self._blocks[layer].buf, self._n[layer], self.n_workers
        header = np.ndarray((HEADER,), np.float64, buf)
        at = 8 * HEADER
        meta = np.ndarray((2, w, META + MAX_TERMS), np.float64, buf, at)
        at += meta.nbytes
        grads = np.ndarray((2, w, n), np.float32, buf, at)
        at += grads.nbytes
        state = np.ndarray((3, n), np.float32, buf, at)
        at += state.nbytes
        keys = np.ndarray((2, w, KEYS), np.uint8, buf, at)
        return header, meta, grads, state, keys

    # ---- the driver's side ---------------------------------------------------------------------
    def hand_out(self, layer: str, server: ParameterServer, adam: tuple[np.ndarray, np.ndarray, float]) -> None:
        """Put the server's Adam state (`ParameterServer.adam_state`) and version where the workers'
        replicas read it."""
        header, _, _, state, _ = self._views(layer)
        m, v, step = adam
        state[1, :m.size], state[2, :v.size] = m, v
        header[0], header[1] = step, server.version

    def take_back(self, layer: str, server: ParameterServer, result: PeerResult) -> None:
        """Load the replica's parameters, Adam state, version and counters into the server."""
        header, _, _, state, _ = self._views(layer)
        nt = server.n_trainable
        server.adopt(state[0].copy(), state[1, :nt].copy(), state[2, :nt].copy(), float(header[0]),
                     int(header[1]), result.updates, result.staleness)

    # ---- a worker's side -----------------------------------------------------------------------
    def load_replica(self, layer: str, replica: ParameterServer, params: np.ndarray) -> None:
        """Make a worker's replica the driver's server: its parameters (as the worker pulled them),
        Adam state and version."""
        header, _, _, state, _ = self._views(layer)
        nt = replica.n_trainable
        replica.adopt(params, state[1, :nt].copy(), state[2, :nt].copy(), float(header[0]), int(header[1]),
                      0, {})

    def hand_back(self, layer: str, replica: ParameterServer, params: np.ndarray) -> None:
        """The first worker of the pool: put the replica's end state where `take_back` reads it."""
        header, _, _, state, _ = self._views(layer)
        adam = replica.adam_state()
        assert adam is not None, "a replica steps every trainable parameter every round"
        m, v, step = adam
        state[0], state[1, :m.size], state[2, :v.size] = params, m, v
        header[0], header[1] = step, replica.version

    def exchange(self, layer: str, worker: int, pool: list[int], parity: int, g: GradResult,
                 barrier: Any, timeout: float | None) -> list[GradResult]:
        """Write this worker's gradient of the round into its slot of set `parity`, wait for the
        pool's, and return the pool's gradients in pool order (views of the slots, read-only until
        the next round of this parity)."""
        _, meta, grads, _, names = self._views(layer)
        row = meta[parity, worker]
        keys = list(g.stats)
        text = ",".join(keys).encode()
        if len(keys) > MAX_TERMS or len(text) >= KEYS:
            raise ValueError(f"a gradient reports {len(keys)} loss terms ({len(text)} bytes of names); peer "
                             f"rounds carry {MAX_TERMS} ({KEYS} bytes)")
        row[0], row[1], row[2] = g.n, g.raw_reward_mean, 0.0 if g.grad is None else 1.0
        row[META:META + len(keys)] = [g.stats[k] for k in keys]
        names[parity, worker, :len(text) + 1] = np.frombuffer(text + b"\0", np.uint8)
        if g.grad is not None:
            grads[parity, worker] = g.grad
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            raise TimeoutError(f"a peer of worker {worker} failed or gave no gradient within {timeout} s") from None
        out = []
        for w in pool:
            r = meta[parity, w]
            has = r[2] > 0
            terms: dict = {}
            if has:
                raw = names[parity, w].tobytes().split(b"\0", 1)[0]
                its = raw.decode().split(",") if raw else []
                terms = dict(zip(its, r[META:META + len(its)].tolist()))
            out.append(GradResult(layer, w, g.version, int(r[0]), grads[parity, w] if has else None, terms,
                                  0.0, float(r[1])))
        return out

    def close(self) -> None:
        _release(self._blocks, self._owner)


def run_peer_update(worker: Any, layer: str, pool: list[int], lr: float, ent_coef: float) -> PeerResult:
    """A worker's side of one peer update (`Worker.peer_update`): the epochs and minibatches the
    server's rounds would run, each round's gradients exchanged with the pool and stepped on this
    worker's replica of the server; the worker's policy follows the replica as it would follow the
    server's publishes. A DivergenceError of the replica comes back as the result's `error` (every
    replica raises it at the same round)."""
    from hdppo.engine.learner import flat_params, load_flat_params
    from hdppo.engine.ppo import EpochLoop
    from hdppo.engine.server import DivergenceError, ParameterServer, ServerStats

    blocks: PeerBlocks = worker.peers
    rt = worker.by_name[layer]
    replica: ParameterServer | None = worker.replicas.get(layer)
    if replica is None:
        replica = worker.replicas[layer] = ParameterServer(rt.info, rt.lc, worker.tc.seed)
    worker.pull(layer)
    blocks.load_replica(layer, replica, flat_params(rt.param_list))
    replica.stats = ServerStats()                  # what this update counts, for the driver's server
    for group in replica.optimizer.param_groups:
        group["lr"] = lr
    timeout = float(worker.tc.worker_timeout) or None
    epochs = EpochLoop(rt.lc.epochs, rt.lc.minibatches, rt.lc.target_kl)
    rows: list[dict] = []
    compute = stepping = 0.0
    parity = 0
    try:
        for epoch, mb in epochs:
            g = worker.gradient(layer, epoch, mb)
            compute += g.seconds
            grads = blocks.exchange(layer, worker.id, pool, parity, g, worker.peer_barrier, timeout)
            parity ^= 1
            t0 = time.perf_counter()
            out = replica.apply(grads)
            if out:
                rows.append(out)
                epochs.measured(out["approx_kl"])
                load_flat_params(rt.param_list, replica.params())        # as a publish and pull would
                rt.version, rt.ent_coef = replica.version, ent_coef
            stepping += time.perf_counter() - t0
    except DivergenceError as exc:
        worker.peer_barrier.abort()
        return PeerResult([], 0, {}, compute, stepping, epochs.epochs_run, error=(exc.problem, exc.fix))
    except BaseException:
        worker.peer_barrier.abort()      # the pool's other workers stop waiting for this one
        raise
    if worker.id == pool[0]:
        blocks.hand_back(layer, replica, replica.params())
    rt.version = -1          # the next pull loads what the driver publishes: the server stays the one source
    return PeerResult(rows, replica.stats.updates, dict(replica.stats.staleness), compute, stepping, epochs.epochs_run)
