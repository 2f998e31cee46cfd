"""sleepy: the grid scenario with a simulator that costs `step_ms` of wall time per copy-step.

A sleep-bound stand-in for a slow external simulator, so worker scaling can be measured past the
number of cores (`examples/studies/bench_scaling.py`). Loaded by path; not a built-in scenario.
"""
from __future__ import annotations

import dataclasses
import time

from hdppo.scenarios.grid import SCENARIO as GRID
from hdppo.scenarios.grid import GridBatch, GridConfig


@dataclasses.dataclass
class SleepyConfig(GridConfig):
    step_ms: float = 10.0


class SleepyBatch(GridBatch):
    cfg: SleepyConfig

    def step(self, actions):
        time.sleep(self.cfg.step_ms / 1000.0 * self.n_envs)
        return super().step(actions)


SCENARIO = dataclasses.replace(
    GRID, name="sleepy", description="grid with a sleep-bound simulator (step_ms per copy-step)",
    config=SleepyConfig, batched_env=lambda cfg, n, seed: SleepyBatch(cfg, n, seed))
