"""DPPO modes: how a due layer learns from its pool's batches, in the sync and the async loop.

A mode owns the worker calls the stage loop makes for a due layer, the server's update and the
epoch loop (`EpochLoop`, with target_kl's early stop). `MODES` maps `LayerConfig.mode` to one;
the stage loop builds one per trained layer (`make_mode`) and asks it instead of switching on the
mode. A new mode is a class here and its entry in `MODES` (plus a `Worker` method if it needs a new
call); see docs/architecture.md, "Adding a DPPO mode or a loss term".
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hdppo.engine.messages import CollectResult, GradResult
from hdppo.engine.peers import PeerBlocks, PeerResult
from hdppo.engine.ppo import EpochLoop
from hdppo.engine.server import DivergenceError
from hdppo.errors import ConfigError

if TYPE_CHECKING:
    from hdppo.engine.config import LayerConfig, TrainConfig
    from hdppo.engine.server import ParameterServer


@dataclass(frozen=True)
class Call:
    """One call to a worker in async mode, `worker.method(*args)`, answered to `layer`'s mode (no
    layer: a collect, which the stage loop handles itself)."""

    method: str
    args: tuple = ()
    layer: str | None = None


class Driver(Protocol):
    """What a mode uses of its stage loop (`hdppo.engine.loop.StageLoop`)."""

    servers: dict[str, ParameterServer]
    pools: dict[str, list[int]]
    timings: dict[str, float]
    latest: dict[str, dict[int, CollectResult]]      # async: each layer's latest batch per worker
    peers: PeerBlocks | None                         # the backend's peer rounds, where it has them

    def timed_call(self, key: str, workers: list[int], method: str, *args: Any) -> list: ...
    def publish(self, name: str) -> None: ...
    def layer_progress(self, name: str) -> float: ...
    def log_update(self, name: str, update_rows: list[dict], results: list[CollectResult]) -> None: ...


class Mode(ABC):
    """How one layer learns in one stage loop. Sync: `update` once its pool's batches are in.
    Async: each worker's new batch gives the `calls` it makes next; each answer goes to `answer`,
    and the mode logs the layer's row (`Driver.log_update`) when an update is complete."""

    def __init__(self, driver: Driver, name: str, lc: LayerConfig) -> None:
        self.driver, self.name, self.lc = driver, name, lc
        self.server = driver.servers[name]
        self.pool = driver.pools[name]

    def epochs(self) -> EpochLoop:
        return EpochLoop(self.lc.epochs, self.lc.minibatches, self.lc.target_kl)

    @abstractmethod
    def update(self) -> list[dict]:
        """Sync: one update from the pool's batches of this collect; its update rows."""

    @abstractmethod
    def calls(self, worker: int) -> Iterator[Call]:
        """Async: the calls `worker` makes for the batch it just collected."""

    @abstractmethod
    def answer(self, worker: int, result: Any) -> None:
        """Async: the answer to one of `calls`."""

    def log_latest(self, update_rows: list[dict]) -> None:
        """Async: the layer's row, over each worker's latest batch."""
        self.driver.log_update(self.name, update_rows, list(self.driver.latest[self.name].values()))


class GradientsMode(Mode):
    """DPPO: workers compute minibatch gradients on their own batches, the server steps on them.
    Sync: one round per (epoch, minibatch), the pool's gradients aggregated into one step. Async:
    each worker runs its own epochs, every gradient applied as it arrives (unless too stale)."""

    def __init__(self, driver: Driver, name: str, lc: LayerConfig) -> None:
        super().__init__(driver, name, lc)
        self.rows: list[dict] = []                         # async: applied gradients not yet logged
        self.loops: dict[int, EpochLoop] = {}              # async: each worker's epochs on its batch

    def update(self) -> list[dict]:
        peers = self.driver.peers
        if peers is not None and self.pool == list(range(peers.n_workers)):
            adam = self.server.adam_state()
            if adam is not None:
                return self.peer_update(peers, adam)
        d, rows, epochs = self.driver, [], self.epochs()
        for epoch, mb in epochs:
            grads: list[GradResult] = d.timed_call("gradient_rounds", self.pool, "gradient", self.name, epoch, mb)
            d.timings["gradient_compute"] += max((g.seconds for g in grads), default=0.0)
            t0 = time.perf_counter()
            out = self.server.apply(grads)
            d.timings["apply"] += time.perf_counter() - t0
            if out:
                rows.append(out)
                epochs.measured(out["approx_kl"])
                d.publish(self.name)
        for row in rows:
            row["epochs"] = float(epochs.epochs_run)
        return rows

    def peer_update(self, peers: PeerBlocks, adam: tuple) -> list[dict]:
        """The same update in peer rounds (hdppo/engine/peers.py): the server's state (`adam`, its
        `adam_state()`) handed to the pool, one `peer_update` call, the first worker's replica
        taken back and published once."""
        d, s = self.driver, self.server
        peers.hand_out(self.name, s, adam)
        lr = s.optimizer.param_groups[0]["lr"]
        results: list[PeerResult] = d.timed_call("gradient_rounds", self.pool, "peer_update", self.name, self.pool,
                                                 lr, s.ent_coef)
        first = results[0]
        if first.error is not None:
            raise DivergenceError(*first.error)
        peers.take_back(self.name, s, first)
        d.timings["gradient_compute"] += max(r.compute_seconds for r in results)
        d.timings["gradient_rounds"] -= first.apply_seconds       # the replicas' steps count as the apply,
        d.timings["apply"] += first.apply_seconds                 # as the server's do in its rounds
        if first.rows:
            d.publish(self.name)
        for row in first.rows:
            row["epochs"] = float(first.epochs_run)
        return first.rows

    def calls(self, worker: int) -> Iterator[Call]:
        """One gradient call per (epoch, minibatch) until the worker's own KLs stop its epochs; then
        the layer's row of every gradient applied since the last one."""
        self.loops[worker] = epochs = self.epochs()
        for epoch, mb in epochs:
            yield Call("gradient", (self.name, epoch, mb), self.name)
        for row in self.rows:
            row["epochs"] = float(epochs.epochs_run)
        self.log_latest(self.rows)
        self.rows = []

    def answer(self, worker: int, result: GradResult) -> None:
        self.server.set_progress(self.driver.layer_progress(self.name))
        if self.server.apply_async(result):
            self.driver.publish(self.name)
            self.rows.append(dict(result.stats))
        if "approx_kl" in result.stats:
            self.loops[worker].measured(result.stats["approx_kl"])


class ExperienceMode(Mode):
    """Workers send their batches; the server runs the PPO epochs on them (`ParameterServer.train`).
    Async: the server trains once every worker of the pool has sent one."""

    def __init__(self, driver: Driver, name: str, lc: LayerConfig) -> None:
        super().__init__(driver, name, lc)
        self.pending: list[Any] = []                       # async: batches waiting for the rest of the pool

    def update(self) -> list[dict]:
        d = self.driver
        batches = d.timed_call("experience", self.pool, "experience", self.name)
        t0 = time.perf_counter()
        out = self.server.train(batches)
        d.timings["train"] += time.perf_counter() - t0
        if not out:
            return []
        d.publish(self.name)
        return [out]

    def calls(self, worker: int) -> Iterator[Call]:
        yield Call("experience", (self.name,), self.name)

    def answer(self, worker: int, result: Any) -> None:
        self.pending.append(result)
        if len(self.pending) < len(self.pool):
            return
        self.server.set_progress(self.driver.layer_progress(self.name))
        out = self.server.train(self.pending)
        self.pending = []
        if out:
            self.driver.publish(self.name)
            self.log_latest([out])


MODES: dict[str, type[Mode]] = {"gradients": GradientsMode, "experience": ExperienceMode}


def check_mode(mode: str) -> None:
    """Refuse a mode `MODES` does not name (RunSpec's check, the Trainer's and the stage loop's)."""
    if mode not in MODES:
        raise ConfigError(f"value {mode!r} for 'mode' is not one of {list(MODES)}", f"use one of {', '.join(MODES)}")


def check_modes(tc: TrainConfig) -> None:
    """check_mode for every layer of a run's config."""
    for lc in tc.layers.values():
        check_mode(lc.mode)


def make_mode(driver: Driver, name: str, lc: LayerConfig) -> Mode:
    """The mode `lc.mode` names, for layer `name` of the stage loop `driver`."""
    check_mode(lc.mode)
    return MODES[lc.mode](driver, name, lc)
