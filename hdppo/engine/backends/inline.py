"""Inline backend: every worker in this process, calls run one after another in submission order."""
from __future__ import annotations

from collections import deque
from typing import Any

from hdppo.engine.backends import Backend, apply_counters
from hdppo.engine.messages import WorkerSpec
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker


class InlineBackend(Backend):
    def __init__(self, specs: list[WorkerSpec], counters: list[dict[str, int]] | None = None) -> None:
        self.params = MemoryParams()
        self.workers = [Worker(spec, self.params) for spec in specs]
        for worker, c in zip(self.workers, counters or []):
            apply_counters(worker, c)
        self.n_workers = len(self.workers)
        self._queue: deque[tuple[int, str, tuple]] = deque()

    def submit(self, worker: int, method: str, *args: Any) -> None:
        self._queue.append((worker, method, args))

    def wait_any(self) -> tuple[int, Any]:
        worker, method, args = self._queue.popleft()
        return worker, getattr(self.workers[worker], method)(*args)

    def close(self) -> None:
        for w in self.workers:
            w.close()
