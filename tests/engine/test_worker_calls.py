"""The calls every backend makes on a Worker, at their edges."""
from __future__ import annotations

import numpy as np

from hdppo.engine.config import resolve_overrides, train_config_to_dict
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker, WorkerSpec


def test_experience_without_a_batch_says_so_at_the_current_version() -> None:
    """A worker Ray restarted has collected nothing yet: asked for a layer's experience it answers
    no batch, at the version it was given (not -1, which the server would count as infinitely
    stale). It raised an AssertionError, which the actor's own special case never reached."""
    tc, _ = resolve_overrides({"envs_per_worker": "2", "rollout": "8"}, ["high", "mid", "low"], set())
    params = MemoryParams()
    w = Worker(WorkerSpec("grid", {}, train_config_to_dict(tc), 0, ["low"]), params)
    assert w.experience("low") == (-1, None)                # nothing published yet
    params.publish("low", 7, 0.01, np.zeros(1, np.float32))      # MemoryParams keeps what it is given
    assert w.experience("low") == (7, None)
