"""Evaluation during training: with `eval_every=N`, the team of the run's newest commit plays
`eval_episodes` fresh episodes at the first round boundary at or after every N env steps, and at
the end of training.

An evaluation due at a round boundary commits first and scores that commit (at the end of training,
the final commit), through `hdppo.runtime.evaluate`, the code `hdppo eval` runs. Its results are
logged as scope "eval" (metrics/eval.csv, TensorBoard `eval/...`), shown as one progress line and
given to the callbacks' `on_eval`. The best so far is kept as `RUN/best` (a copy of its commit,
hdppo/engine/commit.py), chosen by `eval_metric`: an eval column, higher is better (lower with a
leading '-'), by default the top layer's mean return. A resumed run keeps comparing against it.

Fresh episodes: env copies of their own in this process, seeded with the run's seed + EVAL_SEED
(the same episodes at every evaluation of a run, other than `hdppo eval`'s default seed), with
torch's, numpy's and Python's global random streams restored afterwards: the trained weights are
the same with evaluation on or off.

An evaluation's row is written after the commit it scores, so that commit's state does not record
it: a run resumed from that commit (which cuts the row off, as every row after it) evaluates it again
before training on. When a callback stops training from `on_eval`, the run commits once more, so
the stopped run's last commit records the evaluation and a resume does not repeat it.
"""
from __future__ import annotations

import contextlib
import math
import random
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.engine.callbacks import Callbacks, Event
from hdppo.engine.commit import Commit, read_best, write_best
from hdppo.engine.config import TrainConfig
from hdppo.engine.metrics import MetricsSink
from hdppo.errors import ConfigError

SCOPE = "eval"
EVAL_SEED = 1_000_003          # evaluation episodes' seed: (run seed + this) mod 2**32


def metric_of(tc: TrainConfig, names: list[str]) -> tuple[str, float]:
    """The eval column that picks the best and its sign (+1: higher is better); ConfigError for
    `return/LAYER` of a layer the scenario does not have."""
    metric = tc.eval_metric or f"return/{names[0]}"
    column = metric.removeprefix("-")
    layer = column.removeprefix("return/")
    if column.startswith("return/") and layer not in names:
        raise ConfigError(f"eval_metric {metric!r} names layer {layer!r}, which this scenario does not have",
                          f"use return/LAYER with LAYER in {names}, team_return, length or outcome/KEY")
    return column, -1.0 if metric.startswith("-") else 1.0


@contextlib.contextmanager
def own_random_streams() -> Iterator[None]:
    """Run the block without moving torch's, numpy's or Python's global random stream."""
    import torch
    saved = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])


def eval_row(result: dict[str, Any]) -> dict[str, float]:
    """The scope "eval" row of an `evaluate` result: the means of return/LAYER, team_return, length
    and outcome/KEY (each scenario outcome), and the episode count."""
    row = {f"return/{layer}": ci[0] for layer, ci in result["layers"].items()}
    row.update({"team_return": result["team_return"][0], "length": result["length"][0]})
    row.update({f"outcome/{key}": ci[0] for key, ci in result["outcomes"].items()})
    row["episodes"] = float(result["episodes"])
    return row


class TrainingEval:
    """The run's evaluations during training; `state` is the trainer's counters (`eval_steps`: the
    env step of the last evaluation, saved in commits)."""

    def __init__(self, run_dir: Path, tc: TrainConfig, names: list[str], scenario: str, sink: MetricsSink,
                 callbacks: Callbacks, state: dict[str, Any]) -> None:
        self.run_dir, self.tc, self.scenario, self.sink = run_dir, tc, scenario, sink
        self.callbacks, self.state = callbacks, state
        self.column, self.sign = metric_of(tc, names)
        self.metric = tc.eval_metric or self.column
        best = read_best(run_dir)
        self.best = best if best is not None and best.get("metric") == self.metric else None
        self.warned = False

    def due(self) -> bool:
        """An evaluation is due: env_steps passed a multiple of eval_every since the last one, or the
        run finished and its last step was not evaluated."""
        every = self.tc.eval_every
        steps, last = int(self.state["env_steps"]), int(self.state.get("eval_steps", 0))
        return every > 0 and (steps // every > last // every or (bool(self.state.get("finished")) and steps != last))

    def run(self, commit: Commit, stage: str, say: Callable[[str], None] = print) -> dict[str, float]:
        """Evaluate `commit` (the newest, RUN/checkpoints), log it, keep the best, tell the callbacks."""
        from hdppo.runtime.evaluate import evaluate
        t0 = time.perf_counter()
        with own_random_streams():
            result = evaluate(self.run_dir, self.tc.eval_episodes, (self.tc.seed + EVAL_SEED) % 2 ** 32,
                              self.tc.eval_deterministic, scenario=self.scenario)
        row = eval_row(result)
        row.update(commit=float(commit.number), seconds=time.perf_counter() - t0, score=self.score(row))
        if self.better(row["score"]):
            self.best = {"metric": self.metric, "score": row["score"], "commit": commit.number,
                         "env_steps": commit.env_steps, "eval": row}
            write_best(self.run_dir, commit, self.best)
        row["best_score"] = self.best["score"] if self.best else math.nan
        steps = int(self.state["env_steps"])
        self.state["eval_steps"] = steps
        self.sink.log(SCOPE, steps, row)
        if self.tc.progress != "off":
            say(self.line(steps, row))
        if self.callbacks:
            self.callbacks.fire(Event("eval", self.run_dir, stage, steps, commit=commit.number, metrics=dict(row)))
        return row

    def score(self, row: dict[str, float]) -> float:
        if self.column not in row:
            if not self.warned:
                self.warned = True
                warnings.warn(f"eval_metric {self.metric!r} is none of the evaluation's columns "
                              f"({', '.join(sorted(row))}), so no best checkpoint is kept", stacklevel=3)
            return math.nan
        return row[self.column]

    def better(self, score: float) -> bool:
        if math.isnan(score):
            return False
        return self.best is None or self.sign * score > self.sign * float(self.best["score"])

    def line(self, steps: int, row: dict[str, float]) -> str:
        """The progress line of an evaluation."""
        shown = [k for k in row if k.startswith(("return/", "outcome/"))] + ["length"]
        cells = " ".join(f"{k.removeprefix('outcome/')} {row[k]:.3g}" for k in shown)
        best = f"best {self.best['score']:.3g} (commit {self.best['commit']})" if self.best else "best -"
        return (f"[hdppo eval] step {steps:,} commit {int(row['commit'])}: {cells} | {self.column} "
                f"{row['score']:.3g}, {best} | {int(row['episodes'])} episodes in {row['seconds']:.1f} s")
