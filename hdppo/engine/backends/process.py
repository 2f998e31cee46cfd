"""Process backend: one OS process per worker; parameters and gradients in shared memory, calls
and small results through pipes. Every process runs torch with one thread. A sync gradients layer
trained by every worker learns in peer rounds (hdppo/engine/peers.py): one call per update, the
workers exchanging gradients in shared memory and stepping identical replicas of the server.

A worker starts in two steps, each with its own deadline: importing torch and hdppo (hdppo's own
work, `IMPORT_TIMEOUT_S`), then building its envs and policies (the scenario's work: the `start`
timeout, which follows worker_timeout). A worker dies with its driver (Linux: the parent-death
signal), and elsewhere ends quietly when it finds the driver's pipe closed.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from hdppo.engine.backends import Backend, WorkerError, apply_counters, describe_failure, worker_failed
from hdppo.engine.messages import GradResult, WorkerSpec
from hdppo.engine.params import SharedGrads, SharedParams
from hdppo.engine.peers import PeerBlocks, peer_rounds_enabled
from hdppo.errors import HdppoError

IMPORT_TIMEOUT_S = 300.0      # a new process must have imported torch and hdppo within this
START_TIMEOUT_S = 300.0       # building a worker's envs, when no `start` timeout is given
GONE = (EOFError, OSError)    # what a pipe to a driver that died raises (ConnectionResetError, BrokenPipeError)


def _die_with(driver: int) -> None:
    """Make this worker die with its driver: a SIGKILLed driver never leaves workers behind."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != driver:                     # the driver died before the line above
        os._exit(0)


def _worker_main(conn: Connection, spec: WorkerSpec, param_names: dict, grad_names: dict,
                 counters: dict[str, int] | None = None, driver: int = 0, peer_names: dict | None = None,
                 barrier: Any = None) -> None:
    # Ctrl-C and SIGTERM/SIGHUP sent to the whole process group are the driver's to handle (it
    # commits, then closes the pool); a worker ends when the driver closes its pipe, or dies with it.
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    if driver:
        _die_with(driver)
    try:
        _serve(conn, spec, param_names, grad_names, counters, peer_names, barrier)
    except GONE:                                   # the driver is gone: nobody to answer, nothing to say
        os._exit(0)


def _serve(conn: Connection, spec: WorkerSpec, param_names: dict, grad_names: dict,
           counters: dict[str, int] | None, peer_names: dict | None = None, barrier: Any = None) -> None:
    import torch
    torch.set_num_threads(1)
    from hdppo.engine.worker import Worker
    conn.send(("imported", None))
    params = SharedParams(names=param_names)
    grads = SharedGrads(names=grad_names)
    try:
        worker = Worker(spec, params)
    except BaseException as exc:  # report why the worker could not start
        conn.send(_error(exc))
        return
    apply_counters(worker, counters)
    peers = PeerBlocks(names=peer_names) if peer_names is not None else None
    worker.peers, worker.peer_barrier = peers, barrier
    conn.send(("ready", None))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        method, args = msg
        try:
            out = getattr(worker, method)(*args)
            if isinstance(out, GradResult) and out.grad is not None:
                grads.slot(out.layer, worker.id)[:] = out.grad
                out.grad = "shm"  # type: ignore[assignment]
            reply = ("ok", out)
        except BaseException as exc:
            reply = _error(exc)
        conn.send(reply)
    worker.close()
    params.close()
    grads.close()
    if peers is not None:
        peers.close()


def _error(exc: BaseException) -> tuple:
    if isinstance(exc, HdppoError):
        return ("hdppo_error", (exc.problem, exc.fix, exc.where))
    return ("error", describe_failure(exc))


class ProcessBackend(Backend):
    def __init__(self, specs: list[WorkerSpec], layer_sizes: dict[str, int],
                 counters: list[dict[str, int]] | None = None, timeouts: dict[str, float] | None = None) -> None:
        self.n_workers = len(specs)
        self.timeouts: dict[str, float] = dict(timeouts or {})
        self._deadline = {}
        self.params: SharedParams = SharedParams(sizes=layer_sizes)
        self.grads = SharedGrads(self.n_workers, layer_sizes)
        ctx = mp.get_context("spawn")
        # peer rounds (hdppo/engine/peers.py): sync gradients updates of a layer whose pool is every worker
        self.peers: PeerBlocks | None = self._peer_blocks(layer_sizes) if peer_rounds_enabled() else None
        barrier = ctx.Barrier(self.n_workers) if self.peers is not None else None
        peer_names = self.peers.names() if self.peers is not None else None
        self._conns: list[Connection] = []
        self._procs = []
        self._busy = {}
        try:
            for w, spec in enumerate(specs):
                parent, child = ctx.Pipe()
                c = counters[w] if counters else {}
                p = ctx.Process(target=_worker_main, args=(child, spec, self.params.names(), self.grads.names(), c,
                                                           os.getpid(), peer_names, barrier),
                                name=f"hdppo-worker-{spec.worker_id}", daemon=True)
                p.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(p)
            self._start(self.timeouts.get("start", START_TIMEOUT_S))
        except BaseException:
            self.close()
            raise

    def _peer_blocks(self, layer_sizes: dict[str, int]) -> PeerBlocks | None:
        """Peer rounds' shared memory, or None (the server's rounds, with a warning) where the machine
        cannot give it, e.g. a container's small /dev/shm."""
        try:
            return PeerBlocks(self.n_workers, layer_sizes)
        except OSError as exc:
            import warnings
            warnings.warn(f"peer rounds are off: no shared memory for them ({exc}); every minibatch goes through "
                          "the driver's server (slower, same results). A larger /dev/shm (docker run --shm-size=1g) "
                          "brings them back", stacklevel=3)
            return None

    def _start(self, limit: float) -> None:
        """Wait for every worker to import (IMPORT_TIMEOUT_S), then to build its envs (`limit`)."""
        phase = {w: "import" for w in range(self.n_workers)}
        deadline = {w: time.monotonic() + IMPORT_TIMEOUT_S for w in phase}
        for w in phase:
            self._busy[w] = "start"
        while phase:
            left = min(deadline[w] for w in phase) - time.monotonic()
            conns = {self._conns[w]: w for w in phase}
            for ready in wait(list(conns), timeout=max(left, 0.0)):
                conn = cast(Connection, ready)      # wait() hands back the connections it was given
                w = conns[conn]
                try:
                    kind, payload = conn.recv()
                except GONE:
                    raise self._died(w) from None
                if kind == "imported":
                    phase[w], deadline[w] = "build", time.monotonic() + limit
                elif kind == "ready":
                    del phase[w]
                    self._busy.pop(w, None)
                else:
                    raise self._failure(w, "start", kind, payload)
            late = [w for w in phase if deadline[w] <= time.monotonic()]
            if late:
                raise self._slow_start(late[0], phase[late[0]], limit)

    def _slow_start(self, w: int, phase: str, limit: float) -> WorkerError:
        pid, status = self._procs[w].pid, self._status(w)
        if phase == "import":
            return WorkerError(f"worker {w} (pid {pid}, process state {status}) did not import torch and hdppo "
                               f"within {IMPORT_TIMEOUT_S:.0f} s", "check the machine's load and free memory, or use "
                               "fewer workers")
        return WorkerError(f"worker {w} (pid {pid}, process state {status}) did not build its envs within "
                           f"{limit:.0f} s (worker_timeout): the scenario's env constructor or reset hangs or is far "
                           "slower than expected", f"look for a hang in the scenario's env (e.g. `py-spy dump --pid "
                           f"{pid}`), or raise worker_timeout")

    def _status(self, w: int) -> str:
        try:
            import psutil
            return str(psutil.Process(self._procs[w].pid).status())
        except Exception:
            return "unknown"

    def submit(self, worker: int, method: str, *args: Any) -> None:
        self._mark_busy(worker, method)
        try:
            self._conns[worker].send((method, args))
        except (BrokenPipeError, OSError):
            raise self._died(worker) from None

    def wait_any(self, timeout: float | None = None) -> tuple[int, Any]:
        conns = {self._conns[w]: w for w in self._busy}
        if not conns:
            raise RuntimeError("wait_any() with no call outstanding")
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            limits = [self._deadline[w] - now for w in self._busy if w in self._deadline]
            if end is not None:
                limits.append(end - now)
            ready = wait(list(conns), timeout=max(min(limits), 0.0) if limits else None)
            if ready:
                break
            late = [w for w in self._busy if w in self._deadline and self._deadline[w] <= time.monotonic()]
            if late:
                raise self._hung(late[0])
            if end is not None and time.monotonic() >= end:
                names = ", ".join(f"worker {w} ({m})" for w, m in self._busy.items())
                raise WorkerError(f"no answer within {timeout:.0f} s from {names}",
                                  "check the scenario for a hang, or raise the timeout")
        conn = cast(Connection, ready[0])     # wait() hands back the connections it was given
        w = conns[conn]
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            raise self._died(w) from None
        method = self._busy.pop(w)
        self._deadline.pop(w, None)
        if kind != "ok":
            raise self._failure(w, method, kind, payload)
        if isinstance(payload, GradResult) and payload.grad == "shm":
            payload.grad = self.grads.slot(payload.layer, w).copy()
        return w, payload

    @staticmethod
    def _failure(w: int, method: str, kind: str, payload: Any) -> WorkerError:
        if kind == "hdppo_error":
            problem, fix, where = payload
            return WorkerError(f"worker {w} ({method}): {problem}", fix, where=where)
        return worker_failed(w, method, *payload)

    def _hung(self, w: int) -> WorkerError:
        """A worker past its deadline: name it, its pid, its call and what the OS says it is doing."""
        p, method = self._procs[w], self._busy.get(w, "a call")
        status = self._status(w)
        limit = self.call_timeout(method) or 0.0
        return WorkerError(f"worker {w} (pid {p.pid}, process state {status}) gave no answer to {method} within "
                           f"{limit:.0f} s (worker_timeout); it is stopped, deadlocked or far slower than expected",
                           f"look for a hang in the scenario (e.g. `py-spy dump --pid {p.pid}`), or raise "
                           "worker_timeout; `hdppo train --resume RUN` continues from the last commit")

    def _died(self, w: int) -> WorkerError:
        p = self._procs[w]
        p.join(timeout=1.0)
        return WorkerError(f"worker {w} (pid {p.pid}) died with exit code {p.exitcode} during "
                           f"{self._busy.get(w, 'a call')}",
                           "look for an out-of-memory kill or a crash in the scenario")

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for w, p in enumerate(self._procs):
            p.join(timeout=0.5 if w in self._busy else 5.0)     # a busy worker may be hung: do not wait long
            if p.is_alive():
                p.kill()                 # workers ignore SIGTERM (the driver's signal); SIGKILL also ends a stopped one
                p.join(timeout=2.0)
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []
        self.params.close()
        self.grads.close()
        peers = getattr(self, "peers", None)       # absent when __init__ failed before making them
        if peers is not None:
            peers.close()
            self.peers = None
