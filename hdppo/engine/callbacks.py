"""Callbacks: the caller's code at documented points of training, `hdppo.train(..., callbacks=[...])`.

A callback is any object with one or more of `on_update(event)`, `on_commit(event)` and
`on_eval(event)` (subclass `Callback` to get the others as no-ops). Each gets an `Event`; one that
returns True asks training to stop: the loop commits at its next round boundary and `train`
returns normally with `stopped_by` in its summary, the run folder is complete and `hdppo train
--resume RUN` continues it. An exception in a callback ends the run as an HdppoError naming the
callback (the last commit stands; `--debug` shows the traceback).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hdppo.errors import ConfigError, HdppoError

EVENTS = ("update", "commit", "eval")


@dataclass(frozen=True)
class Event:
    """What a callback is told. `kind` is one of EVENTS.

    update: `layer` made one PPO update; `metrics` is the row logged for it (metrics/LAYER.csv).
    commit: run commit number `commit` was written (`run_dir / "commits" / f"{commit:06d}"`).
    eval:   run commit `commit` was evaluated during training (hdppo/engine/evaluation.py); `metrics`
            is the row logged for it (metrics/eval.csv).
    """

    kind: str
    run_dir: Path
    stage: str
    env_steps: int
    layer: str | None = None
    commit: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)


class Callback:
    """A base class whose hooks do nothing; override the ones you need. Return True to stop."""

    def on_update(self, event: Event) -> bool | None:
        return None

    def on_commit(self, event: Event) -> bool | None:
        return None

    def on_eval(self, event: Event) -> bool | None:
        return None


class StopTraining(Exception):
    """Raised at a round boundary, after the commit, when a callback asked to stop (trainer-internal)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _name(cb: Any) -> str:
    return getattr(cb, "__name__", None) or type(cb).__name__


class Callbacks:
    """The run's callbacks: calls each event's hook on every callback that has it, in order, and
    remembers the first one that asked to stop."""

    def __init__(self, callbacks: Iterable[Any] | None = None) -> None:
        self.items = list(callbacks or [])
        for cb in self.items:
            if not any(callable(getattr(cb, f"on_{kind}", None)) for kind in EVENTS):
                raise ConfigError(f"callback {_name(cb)!r} has none of on_update, on_commit, on_eval",
                                  "give it at least one of these methods (or subclass hdppo.Callback)")
        self.stop_reason: str | None = None

    def __bool__(self) -> bool:
        return bool(self.items)

    def fire(self, event: Event) -> None:
        for cb in self.items:
            hook = getattr(cb, f"on_{event.kind}", None)
            if hook is None:
                continue
            try:
                stop = hook(event)
            except HdppoError:
                raise
            except Exception as exc:
                raise HdppoError(f"callback {_name(cb)}.on_{event.kind} raised {type(exc).__name__}: {exc} "
                                 f"(at env step {event.env_steps:,})",
                                 "fix the callback; the last commit stands, continue with "
                                 f"`hdppo train --resume {event.run_dir}`") from exc
            if stop is True and self.stop_reason is None:
                self.stop_reason = f"{_name(cb)}.on_{event.kind} at env step {event.env_steps:,}"
