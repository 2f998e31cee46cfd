"""What a stage loop reads and advances, without the trainer: stages, counters, the run's hooks."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hdppo.engine.callbacks import Callbacks
from hdppo.engine.config import TrainConfig
from hdppo.engine.messages import LayerInfo

if TYPE_CHECKING:
    from hdppo.engine.evaluation import TrainingEval
    from hdppo.engine.server import ParameterServer


@dataclass
class Stage:
    """One training stage: which layers learn and how many env steps it gets."""

    trained: list[str]
    steps: int
    name: str = "train"


@dataclass
class RunState:
    """The trainer's side of a stage loop: the config, the layers (top to bottom), the counters it
    advances, three hooks (commit the servers now, whether a stop signal came or a callback asked to
    stop, stop if a signal came), the run's callbacks and its evaluations during training (None: off)."""

    train: TrainConfig
    infos: list[LayerInfo]
    counters: dict[str, Any]      # env_steps, stage, stage_steps, finished, worker_steps: saved in commits
    commit: Callable[[dict[str, ParameterServer], str], Any]
    stop_requested: Callable[[], bool]
    check_stop: Callable[[], None]
    run_dir: Path = Path(".")
    callbacks: Callbacks = field(default_factory=Callbacks)
    evaluation: TrainingEval | None = None

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.infos]

    def interval(self, layer: str) -> int:
        return self.infos[self.names.index(layer)].interval
