"""Ray backend: every worker is a Ray actor wrapping the same `hdppo.worker.Worker`.

Without an address a local Ray instance starts (and stops again at `close`); with one, the backend
joins that cluster and leaves it running. Every call to a worker carries the parameters of the
layers published since that worker's previous call: inline when small, else as a reference to the
one copy the driver `ray.put` in the object store (Ray resolves it before the call runs). So in sync
mode a worker always computes on exactly the parameters the process backend would give it. In async
mode with `sync_every`, a small board actor also holds the newest version of each layer, so a worker
can refresh in the middle of a rollout. Results (gradients, batches, statistics) come back through
the object store. `layer_sizes` is accepted for the common backend signature; nothing is preallocated.

This module's name shadows nothing: `import ray` below is an absolute import of the real Ray.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import ray

from ..errors import HdppoError
from ..params import ParamStore
from ..train_config import train_config_from_dict
from ..worker import GradResult, Worker, WorkerSpec
from . import Backend, WorkerError

START_TIMEOUT_S = 300.0       # actors must be up (torch imported, envs built) within this
INLINE_BYTES = 100 * 1024     # parameters up to this size travel inline with the calls (Ray's own limit)...
INLINE_TOTAL_BYTES = 4 << 20  # ...unless all workers' copies together exceed this: then via ray.put
CLOSE_TIMEOUT_S = 5.0         # idle workers get this long to close their envs before they are killed
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "NUMEXPR_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


# ---- parameters ------------------------------------------------------------------------------------
class RayParams(ParamStore):
    """The driver's side: the newest (version, ent_coef, parameters) of each layer.

    A published version goes into the object store once (`ray.put`) and workers receive its
    reference; a small one (at most `INLINE_BYTES`, and at most `INLINE_TOTAL_BYTES` over all
    workers) travels inline with the calls instead, which is what Ray itself does with small
    arguments and saves an object-store round trip per update. `changes(sent)` lists what a worker
    has not been sent yet; the backend ships it with the worker's next call. `read` is for the
    driver (tests, debugging).
    """

    def __init__(self, board: Any = None, n_workers: int = 1) -> None:
        self._table: dict[str, tuple[int, int, float, Any]] = {}   # layer -> (seq, version, ent, ref|array)
        self._seq = 0
        self._board = board
        self._n_workers = max(n_workers, 1)

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        flat = np.array(flat, dtype=np.float32)         # float32 like SharedParams; our own copy
        inline = flat.nbytes <= INLINE_BYTES and flat.nbytes * self._n_workers <= INLINE_TOTAL_BYTES
        payload = flat if inline else ray.put(flat)
        self._seq += 1
        self._table[layer] = (self._seq, int(version), float(ent_coef), payload)
        if self._board is not None:
            self._board.set.remote(layer, int(version), float(ent_coef), [payload])   # boxed: stays a reference

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        item = self._table.get(layer)
        if item is None or item[1] <= have:
            return None
        return item[1], item[2], np.array(_resolve(item[3]), dtype=np.float32)

    def changes(self, sent: dict[str, int]) -> list[tuple[str, int, int, float, Any]]:
        """(layer, seq, version, ent_coef, ref|array) of every layer published since `sent` (layer -> seq)."""
        return [(layer, seq, version, ent, payload) for layer, (seq, version, ent, payload) in self._table.items()
                if sent.get(layer) != seq]


def _resolve(payload: Any) -> np.ndarray:
    return ray.get(payload) if isinstance(payload, ray.ObjectRef) else payload


class ParamBoard:
    """The newest (version, ent_coef, [ref]) per layer, for workers refreshing mid-rollout (async)."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[int, float, list]] = {}

    def set(self, layer: str, version: int, ent_coef: float, box: list) -> None:
        self._data[layer] = (version, ent_coef, box)

    def latest(self, layer: str, have: int) -> tuple[int, float, list] | None:
        item = self._data.get(layer)
        return None if item is None or item[0] <= have else item


class ActorParams(ParamStore):
    """The worker's side: the parameters that came with its calls (and, for layers refreshed
    mid-rollout, the board's newest). The first read of a layer in a call uses what the call carried,
    which is the newest version at the time the driver submitted it."""

    def __init__(self, board: Any = None, live: bool = False) -> None:
        self._data: dict[str, tuple[int, float, np.ndarray]] = {}
        self._fresh: set[str] = set()
        self._board = board if live else None

    def publish(self, layer: str, version: int, ent_coef: float, flat: np.ndarray) -> None:
        self._data[layer] = (int(version), float(ent_coef), np.array(flat, dtype=np.float32))  # own copy

    def begin_call(self) -> None:
        self._fresh = set(self._data)

    def read(self, layer: str, have: int) -> tuple[int, float, np.ndarray] | None:
        if layer in self._fresh:
            self._fresh.discard(layer)
        elif self._board is not None:
            item = self._data.get(layer)
            newer = ray.get(self._board.latest.remote(layer, max(have, item[0] if item else -1)))
            if newer is not None:
                version, ent, (payload,) = newer
                self.publish(layer, version, ent, _resolve(payload))
        item = self._data.get(layer)
        if item is None or item[0] <= have:
            return None
        return item


# ---- the actor -------------------------------------------------------------------------------------
def _error(exc: BaseException) -> tuple:
    if isinstance(exc, HdppoError):
        return ("hdppo_error", (exc.problem, exc.fix, exc.where))
    return ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")


class WorkerActor:
    """What runs inside a Ray actor: one `Worker` and its `ActorParams`. A failure to build the
    worker is kept and reported by `ready`, so it reaches the driver as a WorkerError."""

    def __init__(self, spec: WorkerSpec, board: Any = None, live: bool = False) -> None:
        for key, value in WORKER_ENV.items():
            os.environ.setdefault(key, value)
        self.params = ActorParams(board, live)
        self.worker: Worker | None = None
        self.failed: tuple | None = None
        try:
            self.worker = Worker(spec, self.params)      # sets torch to one thread
        except Exception as exc:  # report why the worker could not start
            self.failed = _error(exc)

    def ready(self) -> tuple:
        if self.failed is not None:
            return self.failed
        return ("ok", {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()})

    def call(self, method: str, args: tuple, meta: list, *flats: np.ndarray) -> tuple:
        try:
            for (layer, version, ent), flat in zip(meta, flats):
                self.params.publish(layer, version, ent, flat)
            self.params.begin_call()
            return ("ok", getattr(self.worker, method)(*args))
        except Exception as exc:
            return _error(exc)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


# ---- the backend -----------------------------------------------------------------------------------
class RayBackend(Backend):
    def __init__(self, specs: list[WorkerSpec], layer_sizes: dict[str, int], address: str | None = None,
                 num_cpus_per_worker: float = 1, num_gpus_per_worker: float = 0) -> None:
        self.n_workers = len(specs)
        self.params = RayParams()
        self.node_ids: list[str] = []              # where each worker's actor runs
        self.pids: list[int] = []
        self._actors: list[Any] = []
        self._board: Any = None
        self._started = False                      # this backend started Ray (and stops it at close)
        self._pending: dict[Any, int] = {}         # ObjectRef -> worker
        self._busy: dict[int, str] = {}            # worker -> method
        self._sent: list[dict[str, int]] = [{} for _ in specs]
        try:
            self._init_ray(address or os.environ.get("RAY_ADDRESS") or None,
                           math.ceil(max(self.n_workers * num_cpus_per_worker, 2)))
            live = _refreshes_mid_rollout(specs)
            if live:
                self._board = ray.remote(ParamBoard).options(num_cpus=0).remote()
            self.params = RayParams(self._board, self.n_workers)
            actor_cls = ray.remote(WorkerActor).options(
                num_cpus=num_cpus_per_worker, num_gpus=num_gpus_per_worker, max_restarts=0,
                runtime_env={"env_vars": dict(WORKER_ENV)})
            self._actors = [actor_cls.remote(_portable(spec), self._board, live) for spec in specs]
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    # ---- setup -------------------------------------------------------------------------------------
    def _init_ray(self, address: str | None, num_cpus: int) -> None:
        if ray.is_initialized():                   # this process already joined a cluster: use it
            return
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
                self._started = True
        except Exception as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise HdppoError(f"could not start or join {where}: {type(exc).__name__}: {exc}",
                             "check the address (ray://HOST:10001 or HOST:6379) and that the cluster runs the "
                             "same Ray and Python versions" if address else
                             "run `ray stop`, check /tmp/ray for stale sessions, or use --backend process") from None

    def _wait_ready(self) -> None:
        refs = {a.ready.remote(): w for w, a in enumerate(self._actors)}
        info: dict[int, dict] = {}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=START_TIMEOUT_S)
            if not done:
                names = ", ".join(f"worker {w}" for w in sorted(refs.values()))
                raise WorkerError(f"{names} did not start within {START_TIMEOUT_S:.0f} s",
                                  "check that the cluster has the CPUs/GPUs the workers ask for "
                                  "(`ray status`), or use fewer workers")
            w = refs.pop(done[0])
            info[w] = self._unwrap(w, "start", done[0])
        self.node_ids = [info[w]["node_id"] for w in range(self.n_workers)]
        self.pids = [info[w]["pid"] for w in range(self.n_workers)]

    # ---- calls -------------------------------------------------------------------------------------
    def submit(self, worker: int, method: str, *args: Any) -> None:
        if worker in self._busy:
            raise RuntimeError(f"worker {worker} already runs {self._busy[worker]}")
        changes = self.params.changes(self._sent[worker])
        meta = [(layer, version, ent) for layer, _, version, ent, _ in changes]
        payloads = [payload for *_, payload in changes]   # refs are resolved by Ray before the call runs
        out = self._actors[worker].call.remote(method, args, meta, *payloads)
        for layer, seq, *_ in changes:
            self._sent[worker][layer] = seq
        self._pending[out] = worker
        self._busy[worker] = method

    def wait_any(self, timeout: float | None = None) -> tuple[int, Any]:
        if not self._pending:
            raise RuntimeError("wait_any() with no call outstanding")
        done, _ = ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        if not done:
            names = ", ".join(f"worker {w} ({m})" for w, m in self._busy.items())
            raise WorkerError(f"no answer within {timeout:.0f} s from {names}",
                              "check the scenario for a hang, or raise the timeout")
        ref = done[0]
        w = self._pending.pop(ref)
        method = self._busy.pop(w)
        result = self._unwrap(w, method, ref)
        if isinstance(result, GradResult) and result.grad is not None and not result.grad.flags.writeable:
            result.grad = result.grad.copy()       # a view into the object store is read-only
        return w, result

    def _unwrap(self, w: int, method: str, ref: Any) -> Any:
        try:
            kind, payload = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            where = f" on node {self.node_ids[w]}" if w < len(self.node_ids) else ""
            raise WorkerError(f"worker {w} (Ray actor{where}) died during {method}: {_short(exc)}",
                              "look for an out-of-memory kill, a crash in the scenario, or a lost node "
                              "(`ray status`, /tmp/ray/session_latest/logs)") from None
        except ray.exceptions.RayError as exc:
            raise WorkerError(f"worker {w} failed in {method}: {_short(exc)}",
                              "see the Ray logs under /tmp/ray/session_latest/logs") from None
        if kind == "hdppo_error":
            problem, fix, where = payload
            raise WorkerError(f"worker {w} ({method}): {problem}", fix, where=where)
        if kind == "error":
            raise WorkerError(f"worker {w} failed in {method}: {payload}", "see the worker's traceback above")
        return payload

    # ---- shutdown ----------------------------------------------------------------------------------
    def close(self) -> None:
        actors, self._actors = self._actors, []
        board, self._board = self._board, None
        if ray.is_initialized():
            idle = [a for w, a in enumerate(actors) if w not in self._busy]
            if idle:                                # let idle workers close their envs; busy ones are killed
                try:
                    ray.wait([a.close.remote() for a in idle], num_returns=len(idle), timeout=CLOSE_TIMEOUT_S)
                except Exception:
                    pass
            for a in actors + ([board] if board is not None else []):
                try:
                    ray.kill(a)
                except Exception:
                    pass
        self._pending.clear()
        self._busy.clear()
        self.params = RayParams()
        if self._started:
            self._started = False
            ray.shutdown()


def _refreshes_mid_rollout(specs: list[WorkerSpec]) -> bool:
    """Whether workers read parameters during a collect (an async layer with sync_every)."""
    if not specs:
        return False
    tc = train_config_from_dict(specs[0].train)
    return any(tc.layer(n).sync == "async" and tc.layer(n).sync_every > 0 for n in specs[0].trained)


def _portable(spec: WorkerSpec) -> WorkerSpec:
    """The spec with relative paths (scenario file, frozen checkpoints) made absolute: actors do not
    share the driver's working directory."""
    def absolute(p: str) -> str:
        return str(Path(p).resolve()) if not Path(p).is_absolute() and Path(p).exists() else p
    scenario = spec.scenario
    if scenario.endswith(".py") or "/" in scenario or "\\" in scenario:
        scenario = absolute(scenario)
    return dataclasses.replace(spec, scenario=scenario, frozen={k: absolute(v) for k, v in spec.frozen.items()})


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."
