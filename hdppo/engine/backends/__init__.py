"""Where workers run: `inline` (this process), `process` (OS processes, default), `ray` (a cluster).

Every backend drives the same `Worker` methods with the same call order, so one seed in sync mode
gives the same parameters on every backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from hdppo.engine.params import ParamStore
from hdppo.errors import HdppoError


class WorkerError(HdppoError):
    """A worker failed; the message names the worker and its error."""


class Backend(ABC):
    """A pool of workers answering method calls; results come back per worker."""

    n_workers: int
    params: ParamStore
    timeouts: dict[str, float]        # method -> seconds one call may take before its worker counts as hung

    def call_timeout(self, method: str) -> float | None:
        """The deadline of one `method` call in seconds (None: wait forever)."""
        return getattr(self, "timeouts", {}).get(method)

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
        backend = InlineBackend(specs, counters)
    elif name == "process":
        from hdppo.engine.backends.process import ProcessBackend
        backend = ProcessBackend(specs, layer_sizes, counters)
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

