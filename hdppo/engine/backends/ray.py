"""Ray backend: every worker is a Ray actor wrapping the same `hdppo.engine.worker.Worker`.

Without an address a local Ray instance starts (and stops again at `close`); with one, the backend
joins that cluster and leaves it running. Every call to a worker carries the parameters of the
layers published since that worker's previous call: inline when small, else as a reference to the
one copy the driver `ray.put` in the object store (Ray resolves it before the call runs). So in sync
mode a worker always computes on exactly the parameters the process backend would give it. In async
mode with `sync_every`, a small board actor also holds the newest version of each layer, so a worker
can refresh in the middle of a rollout. Results (gradients, batches, statistics) come back through
the object store. `layer_sizes` is accepted for the common backend signature; nothing is preallocated.

Failures: a worker whose actor dies (process killed, node lost) is recreated, up to `max_restarts`
times per worker. The new actor starts from the worker's spec with the rollout counters of the dead
worker's last completed `collect` (so in sync mode it falls due together with the others), receives
every layer's newest parameters with its first call, and that call (the one that failed) is issued
again; `wait_any` and `call` only ever return answers. The dead worker's partial rollout is lost and
never counted. A re-issued `gradient` or `experience` finds no batch (the new worker has not
collected yet) and answers with none: a GradResult with n=0, which the servers skip, or
`(version, None)`. An error raised inside a worker is not a death and is not retried.

Signals and leftovers: `ray.init` replaces the driver's SIGTERM handler (Ray's own aborts the
process), so the handlers in place before it (the trainer's: commit, then exit 143) are put back
right after it. A local Ray this backend starts gets a reaper (`ray_reaper.py`): when the driver
dies, even by SIGKILL, the Ray processes it started (agents that would outlive it included) are
killed.

The parts: `ray_params.py` moves parameters (driver table, board actor, the worker's store),
`ray_actor.py` is what runs inside an actor, `ray_reaper.py` cleans up after a dead driver, and
this module is the driver's side: starting or joining Ray, issuing calls, restarting dead actors,
shutting down.

This module's name shadows nothing: `import ray` below is an absolute import of the real Ray.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import ray

from hdppo.engine.backends import Backend, WorkerError, worker_failed
from hdppo.engine.backends.ray_actor import WORKER_ENV, WorkerActor
from hdppo.engine.backends.ray_params import INLINE_BYTES, INLINE_TOTAL_BYTES, ActorParams, ParamBoard, RayParams
from hdppo.engine.backends.ray_reaper import Reaper
from hdppo.engine.config import train_config_from_dict
from hdppo.engine.messages import GradResult, WorkerSpec
from hdppo.errors import HdppoError

__all__ = ["RayBackend", "RayParams", "ParamBoard", "ActorParams", "WorkerActor", "INLINE_BYTES",
           "INLINE_TOTAL_BYTES", "LOST"]

START_TIMEOUT_S = 300.0       # actors (first or restarted) must be up (torch imported, envs built) within this
CLOSE_TIMEOUT_S = 5.0         # idle workers get this long to close their envs before they are killed
# What a lost actor looks like to the driver: the actor died or became unreachable (its process was
# killed, its node removed), or the object holding its answer went with its node.
LOST = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError, ray.exceptions.WorkerCrashedError,
        ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError)
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
log = logging.getLogger(__name__)


# ---- the backend -----------------------------------------------------------------------------------
class RayBackend(Backend):
    """Workers as Ray actors (see the module docstring). `max_restarts` is how often each worker's
    actor may be recreated after it dies (0: never); `restarts[w]` counts the restarts worker `w`
    used and `restart_log` records each one (worker, call, node, error)."""

    def __init__(self, specs: list[WorkerSpec], layer_sizes: dict[str, int], address: str | None = None,
                 num_cpus_per_worker: float = 1, num_gpus_per_worker: float = 0, max_restarts: int = 3,
                 counters: list[dict[str, int]] | None = None) -> None:
        if max_restarts < 0:
            raise HdppoError(f"max_restarts must be 0 or more, not {max_restarts}", "use 0 to never restart a worker")
        self.n_workers = len(specs)
        self.max_restarts = int(max_restarts)
        self.restarts = [0] * self.n_workers
        self.restart_log: list[dict[str, Any]] = []
        self.params: RayParams = RayParams()
        self.node_ids: list[str] = [""] * self.n_workers   # where each worker's actor runs
        self.pids: list[int] = [0] * self.n_workers
        self._specs = [_portable(spec) for spec in specs]
        self._actors: list[Any] = []
        self._actor_cls: Any = None
        self._board: Any = None
        self._live = False
        self._started = False                      # this backend started Ray (and stops it at close)
        self._reaper: Reaper | None = None         # kills what that Ray leaves if the driver dies
        self._pending: dict[Any, int] = {}         # ObjectRef -> worker
        self._busy = {}
        self._calls: dict[int, tuple[str, tuple]] = {}         # worker -> its outstanding (method, args)
        self._sent: list[dict[str, int]] = [{} for _ in specs]
        self._counters: list[dict[str, int]] = [dict(c) for c in (counters or [{} for _ in specs])]
        self.timeouts: dict[str, float] = {}
        self._deadline = {}
        try:
            self._init_ray(address or os.environ.get("RAY_ADDRESS") or None,
                           math.ceil(max(self.n_workers * num_cpus_per_worker, 2)))
            self._live = _refreshes_mid_rollout(specs)
            if self._live:                         # on the driver's node: it outlives the loss of any other
                self._board = ray.remote(ParamBoard).options(num_cpus=0, **_on_this_node()).remote()
            self.params = RayParams(self._board, self.n_workers)
            self._actor_cls = ray.remote(WorkerActor).options(
                num_cpus=num_cpus_per_worker, num_gpus=num_gpus_per_worker, max_restarts=0,
                runtime_env={"env_vars": dict(WORKER_ENV)})
            self._actors = [self._new_actor(w) for w in range(self.n_workers)]
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    # ---- setup -------------------------------------------------------------------------------------
    def _init_ray(self, address: str | None, num_cpus: int) -> None:
        if ray.is_initialized():                   # this process already joined a cluster: use it
            return
        main = threading.current_thread() is threading.main_thread()
        handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if main else {}
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                self._reaper = Reaper()
                # address="local": a new instance of our own, even where another Ray runs on this machine
                # (`ray start`, a stale session); address=None would join that one and refuse num_cpus.
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
                self._started = True
        except Exception as exc:
            if self._reaper is not None:
                self._reaper.done()
                self._reaper = None
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise HdppoError(f"could not start or join {where}: {type(exc).__name__}: {exc}",
                             "check the address (ray://HOST:10001 or HOST:6379) and that the cluster runs the "
                             "same Ray and Python versions" if address else
                             "run `ray stop`, check /tmp/ray for stale sessions, or use --backend process") from None
        finally:
            for sig, handler in handlers.items():  # Ray's SIGTERM handler aborts: the caller's own stand
                if handler is not None:
                    signal.signal(sig, handler)

    def _new_actor(self, w: int) -> Any:
        return self._actor_cls.remote(self._specs[w], self._board, self._live, dict(self._counters[w]))

    def _wait_ready(self) -> None:
        refs = {a.ready.remote(): w for w, a in enumerate(self._actors)}
        deadline = time.monotonic() + START_TIMEOUT_S
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=max(deadline - time.monotonic(), 0))
            if not done:
                names = ", ".join(f"worker {w}" for w in sorted(refs.values()))
                raise WorkerError(f"{names} did not start within {START_TIMEOUT_S:.0f} s",
                                  "check that the cluster has the CPUs/GPUs the workers ask for "
                                  "(`ray status`), or use fewer workers")
            w = refs.pop(done[0])
            try:
                self._ready(w, self._answer(w, "start", done[0]))
            except LOST as exc:
                raise self._died(w, "start", exc) from None

    def _ready(self, w: int, info: dict) -> None:
        self.node_ids[w], self.pids[w] = info["node_id"], info["pid"]

    # ---- calls -------------------------------------------------------------------------------------
    def submit(self, worker: int, method: str, *args: Any) -> None:
        if worker in self._busy:
            raise RuntimeError(f"worker {worker} already runs {self._busy[worker]}")
        self._calls[worker] = (method, args)
        self._send(worker)

    def _send(self, worker: int) -> None:
        """Issue the worker's outstanding call with the layers published since its previous one."""
        method, args = self._calls[worker]
        changes = self.params.changes(self._sent[worker])
        meta = [(layer, version, ent) for layer, _, version, ent, _ in changes]
        payloads = [payload for *_, payload in changes]   # refs are resolved by Ray before the call runs
        out = self._actors[worker].call.remote(method, args, meta, *payloads)
        for layer, seq, *_ in changes:
            self._sent[worker][layer] = seq
        self._pending[out] = worker
        self._mark_busy(worker, method)

    def wait_any(self, timeout: float | None = None) -> tuple[int, Any]:
        """The next answer. A worker whose actor died is restarted and its call issued again (see the
        module docstring), so this returns only answers, or raises WorkerError."""
        if not self._pending:
            raise RuntimeError("wait_any() with no call outstanding")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            left = None if deadline is None else max(deadline - now, 0.0)
            hung = min((self._deadline[w] - now for w in self._pending.values() if w in self._deadline), default=None)
            if hung is not None:
                left = max(hung, 0.0) if left is None else min(left, max(hung, 0.0))
            done, _ = ray.wait(list(self._pending), num_returns=1, timeout=left)
            if not done and self._restart_hung():
                continue
            if not done and (deadline is None or time.monotonic() < deadline):
                continue                           # ray.wait can return a little before a worker's deadline
            if not done:
                names = ", ".join(f"worker {w} ({m})" for w, m in self._busy.items())
                raise WorkerError(f"no answer within {timeout:.0f} s from {names}",
                                  "check the scenario for a hang, or raise the timeout")
            ref = done[0]
            w = self._pending.pop(ref)
            method = self._busy.pop(w)
            self._deadline.pop(w, None)
            try:
                result = self._answer(w, method, ref)
            except LOST as exc:
                self._restart(w, method, exc)
                self._send(w)                      # the same call again; it carries every layer's parameters
                continue
            del self._calls[w]
            if isinstance(result, GradResult) and result.grad is not None and not result.grad.flags.writeable:
                result.grad = result.grad.copy()   # a view into the object store is read-only
            return w, result

    def _answer(self, w: int, method: str, ref: Any) -> Any:
        """The payload of a finished call. A lost actor raises its Ray exception (one of LOST); a
        worker's own error raises WorkerError."""
        try:
            kind, payload, *extra = ray.get(ref)
        except LOST:
            raise
        except ray.exceptions.RayError as exc:
            raise WorkerError(f"worker {w} failed in {method}: {_short(exc)}",
                              "see the Ray logs under /tmp/ray/session_latest/logs") from None
        if kind == "hdppo_error":
            problem, fix, where = payload
            raise WorkerError(f"worker {w} ({method}): {problem}", fix, where=where)
        if kind == "error":
            raise worker_failed(w, method, *payload)
        if extra:
            self._counters[w] = extra[0]
        return payload

    # ---- restarts ----------------------------------------------------------------------------------
    def _restart_hung(self) -> bool:
        """Workers past their call's deadline (worker_timeout) are treated like dead actors: killed,
        restarted and sent the call again. False when none is late."""
        now = time.monotonic()
        late = [(ref, w) for ref, w in self._pending.items() if self._deadline.get(w, now + 1) <= now]
        for ref, w in late:
            method = self._busy.pop(w)
            del self._pending[ref]
            limit = self.call_timeout(method) or 0.0
            self._restart(w, method, TimeoutError(f"no answer to {method} within {limit:.0f} s (worker_timeout): "
                                                  "the actor is stopped, deadlocked or far slower than expected"))
            self._send(w)
        return bool(late)

    def _restart(self, w: int, method: str, exc: BaseException) -> None:
        """Replace worker `w`'s lost actor by a new one, up and ready, or raise WorkerError when its
        restarts are used up (or the new actor cannot start within START_TIMEOUT_S)."""
        while True:
            if self.restarts[w] >= self.max_restarts:
                raise self._died(w, method, exc)
            node = self.node_ids[w]
            _kill(self._actors[w])                 # it may only look dead (an unreachable node): make sure
            self.restarts[w] += 1
            self.restart_log.append({"worker": w, "method": method, "node_id": node, "error": _short(exc, 500),
                                     "time": time.time()})
            log.warning("worker %d (Ray actor on node %s) died during %s; restarting it (%d of %d): %s", w,
                        node[:12], method, self.restarts[w], self.max_restarts, _first_line(exc))
            self._actors[w] = self._new_actor(w)
            self._sent[w] = {}                     # a new actor has no parameters: its next call carries all
            ref = self._actors[w].ready.remote()
            done, _ = ray.wait([ref], num_returns=1, timeout=START_TIMEOUT_S)
            if not done:
                raise WorkerError(f"worker {w} died during {method} ({_short(exc, 300)}), and its new actor "
                                  f"(restart {self.restarts[w]} of {self.max_restarts}) did not start within "
                                  f"{START_TIMEOUT_S:.0f} s",
                                  "check that the remaining nodes have the CPUs/GPUs a worker asks for "
                                  "(`ray status`)")
            try:
                self._ready(w, self._answer(w, "restart", ref))
                return
            except LOST as again:                  # died while starting: that restart is used up too
                method, exc = "restart", again

    def _died(self, w: int, method: str, exc: BaseException) -> WorkerError:
        where = f" on node {self.node_ids[w]}" if self.node_ids[w] else ""
        used = (f"; restarts used: {self.restarts[w]} of {self.max_restarts}" if self.max_restarts
                else "; restarts are off (max_restarts=0)")
        return WorkerError(f"worker {w} (Ray actor{where}) died during {method}{used}; last error: {_short(exc)}",
                           "look for an out-of-memory kill, a crash in the scenario, or a lost node "
                           "(`ray status`, /tmp/ray/session_latest/logs); `hdppo train --resume RUN` continues "
                           "from the last run commit")

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
        self._calls.clear()
        self.params = RayParams()
        if self._started:
            self._started = False
            ray.shutdown()
        if self._reaper is not None:
            self._reaper.done()
            self._reaper = None


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


def _short(exc: BaseException, limit: int = 2000) -> str:
    text = str(exc).strip()
    return text if len(text) < limit else text[:limit] + " ..."


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0].strip() if lines else ''}"[:300]


def _kill(actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:
        pass


def _on_this_node() -> dict:
    """Ray options placing an actor on the driver's node (soft: anywhere if that is not possible)."""
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        node = ray.get_runtime_context().get_node_id()
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=True)} if node else {}
    except Exception:
        return {}
