"""The contracts of the engine: what workers, servers and backends pass each other.

Engine modules take these types from here only. The hierarchy's own contracts (`LayerInfo`,
`Decision`, `LayerStep`, `StepResult`) are defined on the environment side (`hdppo.team.interfaces`)
and re-exported here, so nothing in the engine imports `hierarchy.py` or `worker.py` for a type.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hdppo.team.interfaces import Decision, LayerInfo, LayerStep, StepResult

__all__ = ["CollectResult", "Decision", "GradResult", "LayerInfo", "LayerStep", "StepResult", "WorkerSpec"]


@dataclass
class WorkerSpec:
    """Everything a worker needs, picklable for spawned processes and Ray actors."""

    scenario: str
    scenario_overrides: dict
    train: dict
    worker_id: int
    trained: list[str]
    frozen: dict[str, str] = field(default_factory=dict)
    deterministic: bool = False          # frozen policies act greedily (evaluation)


@dataclass
class CollectResult:
    worker: int
    env_steps: int                  # env steps of all copies (copies x steps)
    due: list[str]
    episodes: list[dict]
    goal_counts: dict[str, tuple[int, int]]     # layer -> (goals finished, goals achieved)
    seconds: float
    layer_stats: dict[str, dict]


@dataclass
class GradResult:
    layer: str
    worker: int
    version: int
    n: int
    grad: np.ndarray | None
    stats: dict                 # the minibatch's loss terms as floats (`PPOLossTerms.scalars`)
    seconds: float = 0.0        # the worker's own time on this call (pull, loss, backward, flatten)
    raw_reward_mean: float = 0.0    # of the worker's batch, in env units (aggregate=return weighs by it)
