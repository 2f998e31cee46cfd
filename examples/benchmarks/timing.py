"""The stepping rate the speed benchmarks print: env steps/s of a batch, after a warm-up."""
from __future__ import annotations

import time
from collections.abc import Callable


def rate(step: Callable[[], object], n_envs: int, seconds: float, warmup: int = 3) -> float:
    """Env steps/s (copies x calls) of `step` over `seconds`, after `warmup` calls (a jitted step
    compiles on its first call; caches and allocators settle on the next ones)."""
    for _ in range(warmup):
        step()
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        steps += 1
    return steps * n_envs / (time.perf_counter() - t0)
