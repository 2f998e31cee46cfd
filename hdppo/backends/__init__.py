"""Where workers run: `inline` (this process), `process` (OS processes, default), `ray` (a cluster).

Every backend drives the same `Worker` methods with the same call order, so one seed in sync mode
gives the same parameters on every backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ..errors import HdppoError
from ..params import ParamStore


class WorkerError(HdppoError):
    """A worker failed; the message names the worker and its error."""


class Backend(ABC):
    """A pool of workers answering method calls; results come back per worker."""

    n_workers: int
    params: ParamStore

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


def make_backend(name: str, specs: list, layer_sizes: dict[str, int], *, address: str = "",
                 worker_cpus: float = 1.0, worker_gpus: float = 0.0, worker_restarts: int = 3) -> Backend:
    """Build a backend by name for the given worker specs and trained layers' parameter counts."""
    if name == "inline":
        from .inline import InlineBackend
        return InlineBackend(specs)
    if name == "process":
        from .process import ProcessBackend
        return ProcessBackend(specs, layer_sizes)
    if name == "ray":
        try:
            from .ray import RayBackend
        except ImportError as exc:
            raise HdppoError(f"the ray backend needs Ray ({exc})", "pip install 'hdppo[ray]'") from None
        return RayBackend(specs, layer_sizes, address=address or None,
                          num_cpus_per_worker=worker_cpus, num_gpus_per_worker=worker_gpus,
                          max_restarts=worker_restarts)
    raise HdppoError(f"unknown backend {name!r}", "use --backend inline, process or ray")
