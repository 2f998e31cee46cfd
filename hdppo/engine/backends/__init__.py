"""Where workers run: `inline` (this process), `process` (OS processes, default), `ray` (a cluster).

Every backend drives the same `Worker` methods with the same call order, so one seed in sync mode
gives the same parameters on every backend, and reports a worker's failure the same way: an
HdppoError raised in a worker keeps its problem and fix; any other exception becomes one line
naming the worker, the call, the exception and the line that raised it (`worker_failed`), its
whole traceback kept as the error's cause for `hdppo --debug`. A worker must be up within the
`start` timeout and answer every call within that call's timeout (`worker_timeout`).
"""
from __future__ import annotations

import sys
import time
import traceback
from abc import ABC, abstractmethod
from typing import Any

from hdppo.engine.params import ParamStore
from hdppo.errors import HdppoError


class WorkerError(HdppoError):
    """A worker failed; the message names the worker and its error."""


class CallInterrupted(WorkerError):
    """A stop signal ended a worker's call (inline `collect`) after the run's own handler noted it;
    the stage loop commits the last round boundary and stops."""

    def __init__(self, worker: int, method: str, signum: int) -> None:
        import signal
        self.signum = signum
        super().__init__(f"worker {worker}'s {method} was interrupted by {signal.Signals(signum).name}")


class RemoteTraceback(Exception):
    """A worker's traceback as text, chained as the cause of its WorkerError (`hdppo --debug` shows it)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


DEBUG_HINT = "`hdppo --debug ...` prints the worker's whole traceback"


def describe_failure(exc: BaseException) -> tuple[str, str, str]:
    """A worker's exception as (`Type: the first line of its message`, `file:line in function` where
    it was raised, the whole traceback). The place is the innermost frame outside the standard
    library and installed packages (the scenario's or hdppo's own code), else the innermost one."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = (lines[0][:500] + (" ..." if len(lines) > 1 or len(lines[0]) > 500 else "")) if lines else ""
    summary = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return summary, raised_at(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def raised_at(exc: BaseException, skip: str = "") -> str:
    """`file:line in function` of the innermost frame of `exc`'s traceback outside the standard
    library and installed packages (else the innermost frame); frames of the file `skip` (a signal
    handler that raised it) do not count."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != skip]
    libraries = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    own = [f for f in frames if not f.filename.startswith(libraries) or "site-packages/hdppo" in f.filename]
    if not (own or frames):
        return "an unknown place"
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


def worker_failed(worker: int, method: str, summary: str, where: str, trace: str) -> WorkerError:
    """The WorkerError of an exception that is not an HdppoError, from `describe_failure`'s parts."""
    err = WorkerError(f"worker {worker} failed in {method}: {summary}" + (f" (raised at {where})" if where else ""),
                      f"fix the scenario's code there; {DEBUG_HINT}")
    if trace:
        err.__cause__ = RemoteTraceback(trace)
    return err


class Backend(ABC):
    """A pool of workers answering method calls; results come back per worker."""

    n_workers: int
    params: ParamStore
    timeouts: dict[str, float]        # method -> seconds one call may take before its worker counts as hung;
                                      # "start": seconds a worker may take to build its envs
    _busy: dict[int, str]             # worker -> the method its outstanding call runs
    _deadline: dict[int, float]       # worker -> monotonic time its outstanding call must answer by

    def call_timeout(self, method: str) -> float | None:
        """The deadline of one `method` call in seconds (None: wait forever)."""
        return getattr(self, "timeouts", {}).get(method)

    def _mark_busy(self, worker: int, method: str) -> None:
        """Record that `worker` runs `method` and, where the method has a deadline, when it must answer
        (backends whose calls run elsewhere keep `_busy` and `_deadline`)."""
        self._busy[worker] = method
        limit = self.call_timeout(method)
        if limit is None:
            self._deadline.pop(worker, None)
        else:
            self._deadline[worker] = time.monotonic() + limit

    @abstractmethod
    def submit(self, worker: int, method: str, *args: Any) -> None:
        """Start `worker.method(*args)`; at most one call per worker is outstanding."""

    @abstractmethod
    def wait_any(self) -> tuple[int, Any]:
        """The next finished call: (worker, result)."""

    def call(self, workers: list[int], method: str, *args: Any) -> list[Any]:
        """Run a method on several workers at once; results in the order of `workers`."""
        for w in workers:
            self.submit(w, method, *args)
        got: dict[int, Any] = {}
        while len(got) < len(workers):
            w, result = self.wait_any()
            got[w] = result
        return [got[w] for w in workers]

    @abstractmethod
    def close(self) -> None:
        """Stop the workers and free shared resources."""


def apply_counters(worker: Any, counters: dict[str, int] | None) -> None:
    """Start a worker's rollouts part-way (layer -> env steps already in the current rollout), so a
    resumed or restarted worker falls due at the same env steps as the one it continues."""
    for layer, steps in (counters or {}).items():
        if layer in worker.by_name:
            worker.by_name[layer].buffer.env_steps = int(steps)


def make_backend(name: str, specs: list, layer_sizes: dict[str, int], *, address: str = "",
                 worker_cpus: float = 1.0, worker_gpus: float = 0.0, worker_restarts: int = 3,
                 counters: list[dict[str, int]] | None = None,
                 timeouts: dict[str, float] | None = None) -> Backend:
    """Build a backend by name for the given worker specs and trained layers' parameter counts.
    `counters` (per worker) continues rollouts part-way; `timeouts` (per method, seconds) bounds
    every call."""
    counters = counters or [{} for _ in specs]
    backend: Backend
    if name == "inline":
        from hdppo.engine.backends.inline import InlineBackend
        backend = InlineBackend(specs, counters, timeouts=timeouts)
    elif name == "process":
        from hdppo.engine.backends.process import ProcessBackend
        backend = ProcessBackend(specs, layer_sizes, counters, timeouts=timeouts)
    elif name == "ray":
        try:
            from hdppo.engine.backends.ray import RayBackend
        except ImportError as exc:
            raise HdppoError(f"the ray backend needs Ray ({exc})", "pip install 'hdppo[ray]'") from None
        backend = RayBackend(specs, layer_sizes, address=address or None,
                             num_cpus_per_worker=worker_cpus, num_gpus_per_worker=worker_gpus,
                             max_restarts=worker_restarts, counters=counters)
    else:
        raise HdppoError(f"unknown backend {name!r}", "use --backend inline, process or ray")
    backend.timeouts = dict(timeouts or {})
    return backend

