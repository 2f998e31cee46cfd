"""`hdppo sweep`: an Optuna study over a search space (hdppo.analysis.sweep_space), one trial a
normal run folder (DIR/trial_0000, ...), trained in this process with `hdppo.train`, one after another.

- The study lives in DIR/study.db (SQLite). Running the same sweep again continues it until it holds
  the asked number of trials; a sweep of other settings in that folder is refused.
- Sampler: TPE (seeded; its first TPE_STARTUP trials are random draws), or random.
- Pruning: MedianPruner on the training curve. After each update of the top trained layer its mean
  `return` over the last FINAL_WINDOW updates is reported at the percent of the budget done; a trial
  below the median of the earlier trials at that point, past PRUNE_WARMUP percent, is stopped by the
  callback's True (the run folder stays, resumable) and counts as pruned.
- Objective: that same mean at the end of training (the final mean return of the top trained layer),
  or an evaluation metric (`eval:team_return`, `eval:win`, ...) over fresh episodes; maximized unless
  the direction says minimize.
- Counting: complete, pruned and failed trials (training raised, e.g. diverged) count toward the
  asked number. A trial interrupted (a signal, a kill, the sweep stopped) is marked failed without
  counting and its parameters are queued again, so the next run of the sweep retries them first.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hdppo.analysis.sweep_space import Param
from hdppo.errors import ConfigError, HdppoError

STUDY_FILE = "study.db"
STUDY_NAME = "hdppo-sweep"
SETTINGS_ATTR = "hdppo_sweep"      # the sweep's settings, kept in the study to refuse another sweep there
FINAL_WINDOW = 5                   # updates averaged for the reported and final return
TPE_STARTUP = 5                    # random trials before TPE models the results
PRUNE_STARTUP = 3                  # finished trials before any is pruned
PRUNE_WARMUP = 25                  # percent of the budget before a trial may be pruned
EVAL_SEED = 12345                  # `hdppo eval`'s default seed: the same episodes for every trial


def optuna_module() -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError("hdppo sweep needs optuna, which is not installed",
                          'pip install "hdppo[sweep]"') from None
    return optuna


@dataclass
class Sweep:
    """What a sweep is: the scenario, its space, the fixed overrides and how trials are judged."""

    scenario: str
    space: list[Param]
    overrides: dict[str, str] = field(default_factory=dict)     # key=value from the command line
    steps: int | None = None
    layers: str = "all"
    objective: str = "return"          # or eval:METRIC
    direction: str = "maximize"
    sampler: str = "tpe"
    sampler_seed: int = 0
    prune: bool = True
    eval_episodes: int = 20

    def settings(self) -> dict[str, Any]:
        """JSON of every field: what must match for a second run to continue the same study."""
        return json.loads(json.dumps(asdict(self), default=str))

    def train_overrides(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.overrides, **({"steps": self.steps} if self.steps is not None else {}), **params}


def open_study(folder: Path, sweep: Sweep) -> Any:
    """DIR/study.db's study, made on first use; one of other settings is refused in one line."""
    optuna = optuna_module()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not (folder / STUDY_FILE).is_file() and any(folder.glob("trial_*")):
        raise ConfigError(f"{folder} holds trial folders but no {STUDY_FILE}", "pass a new --out for a new sweep")
    folder.mkdir(parents=True, exist_ok=True)
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=PRUNE_STARTUP, n_warmup_steps=PRUNE_WARMUP)
              if sweep.prune else optuna.pruners.NopPruner())
    study = optuna.create_study(storage=f"sqlite:///{(folder / STUDY_FILE).resolve()}", study_name=STUDY_NAME,
                                direction=sweep.direction, load_if_exists=True, pruner=pruner)
    settings = sweep.settings()
    before = study.user_attrs.get(SETTINGS_ATTR)
    if before is None:
        study.set_user_attr(SETTINGS_ATTR, settings)
    elif before != settings:
        changed = sorted(k for k in settings if settings[k] != before.get(k))
        raise ConfigError(f"{folder} holds a sweep with other settings ({', '.join(changed)} differ)",
                          "rerun the sweep exactly as before to continue it (only --trials may change), or pass "
                          "a new --out")
    seed = sweep.sampler_seed + len(study.trials)        # a continued study draws anew, not its first draws again
    study.sampler = (optuna.samplers.RandomSampler(seed=seed) if sweep.sampler == "random"
                     else optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP))
    return study


def counted(study: Any) -> int:
    """Trials that count toward the asked number: complete, pruned, or failed in training."""
    from optuna.trial import TrialState
    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and "error" in t.user_attrs) for t in study.trials)


def requeue_interrupted(study: Any) -> list[int]:
    """Trials left running by a sweep that was killed: marked failed (not counted), their parameters
    queued again. The caller holds the folder's lock, so no other sweep is running them."""
    from optuna.trial import TrialState
    stale = [t for t in study.trials if t.state == TrialState.RUNNING]
    for t in stale:
        _requeue(study, t.number, t.params)
    return [t.number for t in stale]


def _requeue(study: Any, trial: Any, params: dict[str, Any]) -> None:
    """Fail `trial` (a Trial or its number) without counting it and queue its parameters again."""
    from optuna.trial import TrialState
    study.tell(trial, state=TrialState.FAIL)
    number = trial if isinstance(trial, int) else trial.number
    if params:
        study.enqueue_trial(params, user_attrs={"retry_of": number})


class Reporter:
    """The pruning callback: the top trained layer's smoothed `return`, reported at the percent of
    the budget done; asks training to stop once the trial should be pruned."""

    def __init__(self, trial: Any, layer: str, steps: int) -> None:
        self.trial, self.layer, self.steps = trial, layer, max(1, steps)
        self.returns: list[float] = []
        self.last_step = 0
        self.pruned_at: int | None = None

    def value(self) -> float:
        tail = self.returns[-FINAL_WINDOW:]
        return float(sum(tail) / len(tail)) if tail else float("nan")

    def on_update(self, event: Any) -> bool:
        ret = event.metrics.get("return", float("nan"))
        if event.layer != self.layer or not math.isfinite(ret):
            return False
        self.returns.append(float(ret))
        step = min(100, event.env_steps * 100 // self.steps)
        if step <= self.last_step:
            return False
        self.last_step = step
        self.trial.report(self.value(), step)
        if self.trial.should_prune():
            self.pruned_at = step
            return True
        return False


def top_layer(sweep: Sweep, params: dict[str, Any]) -> tuple[str, int]:
    """The top trained layer's name and the run's budget in env steps, as `hdppo train` resolves them."""
    from hdppo.engine.spec import RunSpec
    spec = RunSpec.from_overrides(sweep.scenario, sweep.train_overrides(params), layers=sweep.layers)
    names = spec.resolve().layer_names
    return next(n for n in names if n in spec.layers), spec.train.steps


def run_trial(study: Any, sweep: Sweep, folder: Path, say: Callable[[str], None]) -> Any:
    """Ask the study for a trial, train it into DIR/trial_NNNN and tell the study how it went."""
    from optuna.trial import TrialState

    from hdppo.engine.entry import train
    trial = study.ask(distributions(sweep.space))
    run = folder / f"trial_{trial.number:04d}"
    trial.set_user_attr("run", str(run))
    layer, steps = top_layer(sweep, trial.params)
    reporter = Reporter(trial, layer, steps)
    say(f"trial {trial.number}: {format_params(trial.params)} -> {run}")
    start = time.monotonic()
    try:
        train(sweep.scenario, sweep.train_overrides(trial.params), layers=sweep.layers, out=run,
                    callbacks=[reporter])
        value = objective_value(sweep, run, reporter)
    except HdppoError as exc:
        if isinstance(exc, SweepStopped):
            trial.set_user_attr("interrupted", exc.problem)
            _requeue(study, trial, trial.params)
            raise
        trial.set_user_attr("error", exc.problem)
        study.tell(trial, state=TrialState.FAIL)
        say(f"trial {trial.number}: failed ({exc.problem})")
        return study.trials[trial.number]
    except BaseException:                                 # a signal, Ctrl-C: retried by the next run
        trial.set_user_attr("interrupted", "stopped by a signal")
        _requeue(study, trial, trial.params)
        raise
    trial.set_user_attr("seconds", round(time.monotonic() - start, 1))
    if reporter.pruned_at is not None:
        trial.set_user_attr("pruned_at", reporter.pruned_at)
        study.tell(trial, state=TrialState.PRUNED)
        say(f"trial {trial.number}: pruned at {reporter.pruned_at}% of the budget "
            f"(return {reporter.value():.4g}, below the median of the trials before)")
    else:
        study.tell(trial, value)
        say(f"trial {trial.number}: {sweep.objective} {value:.4g} in {time.monotonic() - start:.1f} s")
    return study.trials[trial.number]


class SweepStopped(HdppoError):
    """A problem with the sweep itself (not the trial's parameters): the sweep stops, the trial is retried."""


def objective_value(sweep: Sweep, run: Path, reporter: Reporter) -> float:
    """The trial's objective: the top layer's final mean return, or `eval:METRIC` of an evaluation."""
    if sweep.objective == "return":
        value = reporter.value()
        if not math.isfinite(value):
            raise HdppoError(f"no episode of layer {reporter.layer!r} ended in the trial's budget, so it has no "
                             "return", "raise --steps so that episodes end")
        return value
    from hdppo.analysis.seeds import eval_metrics
    from hdppo.runtime.evaluate import evaluate, save_eval
    res = evaluate(run, episodes=sweep.eval_episodes, seed=EVAL_SEED)
    save_eval(run, res)
    metrics = eval_metrics(res)
    metric = sweep.objective.removeprefix("eval:")
    if metric not in metrics:
        raise SweepStopped(f"--objective {sweep.objective}: the evaluation has no metric {metric!r}",
                           f"use --objective return or eval:METRIC with METRIC one of {', '.join(metrics)}")
    return metrics[metric]


def distributions(space: list[Param]) -> dict[str, Any]:
    """Optuna's distribution of each swept key."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    out: dict[str, Any] = {}
    for p in space:
        if p.choices is not None:
            out[p.key] = CategoricalDistribution(list(p.choices))
        elif p.is_int:
            out[p.key] = IntDistribution(int(p.low or 0), int(p.high or 0), log=p.log, step=int(p.step or 1))
        else:
            out[p.key] = FloatDistribution(float(p.low or 0), float(p.high or 0), log=p.log, step=p.step)
    return out


def run_sweep(folder: Path, sweep: Sweep, trials: int, say: Callable[[str], None] = print) -> Any:
    """Continue (or start) the study in `folder` until `trials` trials count; returns the study."""
    from hdppo.runlock import RunLock
    folder.mkdir(parents=True, exist_ok=True)
    with RunLock(folder, command="hdppo sweep"):
        study = open_study(folder, sweep)
        retried = requeue_interrupted(study)
        if retried:
            say(f"trial(s) {', '.join(map(str, retried))} were interrupted: marked failed, their parameters queued "
                "again")
        done = counted(study)
        say(f"sweep {folder}: {done} of {trials} trials done" + (", continuing" if 0 < done < trials else ""))
        while counted(study) < trials:
            run_trial(study, sweep, folder, say)
    return study


def format_params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v, short=True)}" for k, v in params.items())


def format_value(value: Any, short: bool = False) -> str:
    """A sampled value as `hdppo train` reads it back: exact (repr), or to 4 digits for a table."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}" if short else repr(value)
    return str(value)


def best_command(sweep: Sweep, trial: Any) -> str:
    """The best trial as a ready `hdppo train` command: the sweep's overrides and the trial's values."""
    import shlex
    words = ["hdppo", "train", sweep.scenario]
    if sweep.steps is not None:
        words += ["--steps", str(sweep.steps)]
    if sweep.layers != "all":
        words += ["--layer", sweep.layers]
    words += [f"{k}={v}" for k, v in sweep.overrides.items()]
    words += [f"{k}={format_value(v)}" for k, v in trial.params.items()]
    return shlex.join(words)
