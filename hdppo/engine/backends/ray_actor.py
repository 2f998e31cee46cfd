"""What runs inside a Ray actor: `WorkerActor` wraps the same `hdppo.engine.worker.Worker` that every
backend drives, with `ActorParams` as its parameter store. The worker itself never imports Ray."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import ray

from hdppo.engine.backends import describe_failure
from hdppo.engine.backends.ray_params import ActorParams
from hdppo.engine.messages import WorkerSpec
from hdppo.engine.worker import Worker
from hdppo.errors import HdppoError

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "NUMEXPR_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _error(exc: BaseException) -> tuple:
    if isinstance(exc, HdppoError):
        return ("hdppo_error", (exc.problem, exc.fix, exc.where))
    return ("error", describe_failure(exc))


class WorkerActor:
    """What runs inside a Ray actor: one `Worker` and its `ActorParams`. A failure to build the
    worker is kept and reported by `ready`, so it reaches the driver as a WorkerError.

    `counters` (layer -> env steps in the current rollout) restarts a worker where the one it replaces
    left off after its last completed `collect`, so its rollouts fall due at the same steps. Every
    answer carries the counters after the call, for the driver to keep."""

    def __init__(self, spec: WorkerSpec, board: Any = None, live: bool = False,
                 counters: dict[str, int] | None = None) -> None:
        for key, value in WORKER_ENV.items():
            os.environ.setdefault(key, value)
        self.params = ActorParams(board, live)
        self.worker: Worker | None = None
        self.failed: tuple | None = None
        try:
            self.worker = Worker(spec, self.params)      # sets torch to one thread
            for layer, steps in (counters or {}).items():
                self.worker.by_name[layer].buffer.env_steps = int(steps)
        except Exception as exc:  # report why the worker could not start
            self.failed = _error(exc)

    def ready(self) -> tuple:
        if self.failed is not None:
            return self.failed
        return ("ok", {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()})

    def counters(self) -> dict[str, int]:
        assert self.worker is not None            # asked only after ready() reported a started worker
        return {rt.info.name: rt.buffer.env_steps for rt in self.worker.layers if rt.trained}

    def call(self, method: str, args: tuple, meta: list, *flats: np.ndarray) -> tuple:
        try:
            if self.failed is not None:
                return self.failed
            for (layer, version, ent), flat in zip(meta, flats):
                self.params.publish(layer, version, ent, flat)
            self.params.begin_call()
            out = getattr(self.worker, method)(*args)
            return ("ok", out, self.counters())
        except Exception as exc:
            return _error(exc)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
