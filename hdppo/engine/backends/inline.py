"""Inline backend: every worker in this process, calls run one after another in submission order.

It behaves as the process backend does, in this one process:

- a worker's exception is the same WorkerError (an HdppoError keeps its problem and fix; any other
  names the worker, the call, the exception and the line that raised it);
- building a worker must end within the `start` timeout and each call within its own
  (`worker_timeout`): a timer (SIGALRM) interrupts a call past its deadline, and the error names
  the line it hung at;
- a stop signal (SIGINT, SIGTERM, SIGHUP) that arrives during a `collect` ends that collect at once
  (`CallInterrupted`) once the run's own handler has noted it; nothing has changed since the last
  round boundary, so the stage loop commits that and stops, as the process backend's driver stops
  after its round. Signals during other calls wait for the call, as there.

Timers and interruptions need the main thread (and a platform with SIGALRM); elsewhere calls run
unbounded, as before.
A scenario's own SIGALRM handler is set aside during each call and put back after it.
"""
from __future__ import annotations

import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hdppo.engine.backends import (
    Backend,
    CallInterrupted,
    WorkerError,
    apply_counters,
    describe_failure,
    raised_at,
    worker_failed,
)
from hdppo.engine.messages import WorkerSpec
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker
from hdppo.errors import HdppoError

STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
INTERRUPTIBLE = {"collect"}         # calls a stop signal ends at once: they change nothing the servers hold


class _Alarm(BaseException):
    """Raised inside a call past its deadline (a BaseException: an env's `except Exception` keeps it)."""


class _Interrupt(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class InlineBackend(Backend):
    def __init__(self, specs: list[WorkerSpec], counters: list[dict[str, int]] | None = None,
                 timeouts: dict[str, float] | None = None) -> None:
        self.timeouts = dict(timeouts or {})
        self.params = MemoryParams()
        self._armed = False                 # a guarded call is running (late signals find it False)
        self.workers: list[Worker] = []
        for w, spec in enumerate(specs):
            self.workers.append(self._start(w, spec))
        for worker, c in zip(self.workers, counters or []):
            apply_counters(worker, c)
        self.n_workers = len(self.workers)
        self._queue: deque[tuple[int, str, tuple]] = deque()

    def _start(self, w: int, spec: WorkerSpec) -> Worker:
        limit = self.timeouts.get("start")
        try:
            with self._guarded(limit, interruptible=False):
                return Worker(spec, self.params)
        except _Alarm as exc:
            where = raised_at(exc, skip=__file__)
            self.close()
            raise WorkerError(f"worker {w} (inline, pid {os.getpid()}) did not build its envs within {limit:.0f} s "
                              f"(worker_timeout): the scenario's env constructor or reset hangs at {where}, or is "
                              "far slower than expected",
                              "look for a hang there in the scenario, or raise worker_timeout") from exc
        except Exception as exc:
            self.close()
            raise _failure(w, "start", exc)   # noqa: B904 - _failure chains exc as the cause

    def submit(self, worker: int, method: str, *args: Any) -> None:
        self._queue.append((worker, method, args))

    def wait_any(self) -> tuple[int, Any]:
        worker, method, args = self._queue.popleft()
        limit = self.call_timeout(method)
        try:
            with self._guarded(limit, interruptible=method in INTERRUPTIBLE):
                return worker, getattr(self.workers[worker], method)(*args)
        except _Alarm as exc:
            self._queue.clear()
            raise self._hung(worker, method, limit or 0.0, raised_at(exc, skip=__file__)) from exc
        except _Interrupt as stop:
            self._queue.clear()
            raise CallInterrupted(worker, method, stop.signum) from None
        except Exception as exc:
            self._queue.clear()
            raise _failure(worker, method, exc)   # noqa: B904 - _failure chains exc as the cause

    def _hung(self, w: int, method: str, limit: float, where: str) -> WorkerError:
        return WorkerError(f"worker {w} (inline, pid {os.getpid()}) gave no answer to {method} within {limit:.0f} s "
                           f"(worker_timeout); it hung at {where}, deadlocked or far slower than expected",
                           "look for a hang there in the scenario, or raise worker_timeout; `hdppo train --resume "
                           "RUN` continues from the last commit")

    @contextmanager
    def _guarded(self, limit: float | None, interruptible: bool) -> Iterator[None]:
        """Run the block with a deadline (SIGALRM after `limit` s) and, if `interruptible`, ended by a
        stop signal after the handler in place (the trainer's) has seen it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved: dict[int, Any] = {}
        try:
            if interruptible:
                for sig in STOP_SIGNALS:
                    handler = signal.getsignal(sig)
                    if callable(handler):           # someone handles it (the trainer): end the call after them
                        saved[sig] = signal.signal(sig, self._interrupting(handler))
            if limit is not None and limit > 0 and hasattr(signal, "setitimer"):
                saved[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._alarm)
                signal.setitimer(signal.ITIMER_REAL, limit)
            self._armed = True
            yield
        finally:
            self._armed = False
            if getattr(signal, "SIGALRM", None) in saved:
                signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    def _alarm(self, signum: int, frame: Any) -> None:
        if self._armed:
            raise _Alarm()

    def _interrupting(self, handler: Callable[[int, Any], Any]) -> Callable[[int, Any], None]:
        def on_signal(signum: int, frame: Any) -> None:
            handler(signum, frame)                  # may raise KeyboardInterrupt itself (a second signal)
            if self._armed:
                raise _Interrupt(signum)
        return on_signal

    def close(self) -> None:
        for w in self.workers:
            w.close()


def _failure(w: int, method: str, exc: Exception) -> WorkerError:
    """A worker's exception as the process backend reports it."""
    if isinstance(exc, WorkerError):
        return exc
    if isinstance(exc, HdppoError):
        err = WorkerError(f"worker {w} ({method}): {exc.problem}", exc.fix, where=exc.where)
    else:
        err = worker_failed(w, method, *describe_failure(exc))
    err.__cause__ = exc                             # the real traceback, for `hdppo --debug`
    return err
