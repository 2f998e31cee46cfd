"""`hdppo sweep`: an Optuna study of a scenario's training settings (hdppo.analysis.sweep), then a
table of the trials and the best one as a ready `hdppo train` command."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hdppo.cli.common import positive_int, seed_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sweep", parents=parents, help="search training settings with Optuna (TPE, pruning on the "
                       "training curve); each trial a run folder, the best printed as a `hdppo train` command")
    p.add_argument("scenario", help="a scenario name or a path to a scenario .py file")
    p.add_argument("overrides", nargs="*", help="key=value settings every trial shares, as for `hdppo train`")
    p.add_argument("--space", required=True, metavar="FILE.yaml",
                   help="the swept keys and their ranges or choices (docs/experiments.md#sweeps)")
    p.add_argument("--trials", type=positive_int, required=True,
                   help="trials the study should hold; rerunning the same sweep continues up to this many")
    p.add_argument("--out", help="sweep folder: DIR/study.db and DIR/trial_NNNN (default runs/sweep-SCENARIO-SPACE)")
    p.add_argument("--steps", help="env steps of each trial")
    p.add_argument("--layer", default="all", help="layers to train, as for `hdppo train` (default all)")
    p.add_argument("--objective", default="return", metavar="return|eval:METRIC",
                   help="return: the top trained layer's final mean training return (default); eval:METRIC: a "
                        "metric of `hdppo eval` after training (eval:team_return, eval:win, eval:length, ...)")
    p.add_argument("--direction", choices=["maximize", "minimize"], default="maximize")
    p.add_argument("--eval-episodes", type=positive_int, default=20, help="episodes of an eval:METRIC objective")
    p.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    p.add_argument("--sampler-seed", type=seed_int, default=0, help="the sampler's seed (trials train with seed=)")
    p.add_argument("--no-prune", action="store_true", help="train every trial to the end")
    p.set_defaults(func=run)


def sweep_from_args(args: argparse.Namespace) -> Any:
    """The Sweep of the command line, its space file read and checked against the scenario."""
    from hdppo.analysis.sweep import Sweep
    from hdppo.analysis.sweep_space import check_space, load_space
    from hdppo.engine.spec import RunSpec
    from hdppo.errors import ConfigError
    from hdppo.overrides import coerce, parse_assignments
    overrides = parse_assignments(args.overrides)
    if args.steps is not None and ("steps" in overrides or "train.steps" in overrides):
        raise ConfigError("--steps and steps= both set the budget", "pass only one of them")
    if args.objective != "return" and not args.objective.startswith("eval:"):
        raise ConfigError(f"--objective {args.objective!r} is neither return nor eval:METRIC",
                          "pass --objective return or e.g. --objective eval:team_return")
    sweep = Sweep(args.scenario, load_space(args.space), overrides,
                  coerce(args.steps, int, "steps") if args.steps is not None else None, args.layer, args.objective,
                  args.direction, args.sampler, args.sampler_seed, not args.no_prune, args.eval_episodes)
    RunSpec.from_overrides(sweep.scenario, sweep.train_overrides({}), layers=sweep.layers)   # the shared settings
    check_space(sweep.space, sweep.scenario, sweep.train_overrides({}), sweep.layers, where=f"space file {args.space}")
    return sweep


def run(args: argparse.Namespace) -> int:
    import signal
    import sys

    from hdppo.analysis.sweep import optuna_module, run_sweep
    from hdppo.cli.common import out_folder
    from hdppo.engine.trainer import RunInterrupted
    optuna_module()
    sweep = sweep_from_args(args)
    folder = out_folder(args.out or Path("runs") / f"sweep-{Path(args.scenario).stem}-{Path(args.space).stem}")
    try:
        study = run_sweep(folder, sweep, args.trials, lambda line: print(line, flush=True))
    except RunInterrupted as stop:
        print(f"hdppo: sweep stopped by {signal.Signals(stop.signum).name}; the trial it ran is queued again: "
              "rerun the same command to continue", file=sys.stderr)
        return 128 + stop.signum
    print_summary(study, sweep, folder)
    return 0


def print_summary(study: Any, sweep: Any, folder: Path) -> None:
    """The trials as a table, then the best one as a `hdppo train` command."""
    from optuna.trial import TrialState
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hdppo.analysis.sweep import best_command, format_value
    keys = [p.key for p in sweep.space]
    table = Table(title=f"hdppo sweep {folder}: {len(study.trials)} trials ({sweep.direction} {sweep.objective})")
    for column in ("trial", "state", sweep.objective, *keys, "s", "note"):
        table.add_column(escape(column), overflow="fold")
    for t in study.trials:
        value = (t.value if t.state == TrialState.COMPLETE else     # a pruned trial: its last report
                 t.intermediate_values[max(t.intermediate_values)] if t.state == TrialState.PRUNED else None)
        note = (f"at {t.user_attrs['pruned_at']}%" if "pruned_at" in t.user_attrs
                else t.user_attrs.get("error") or t.user_attrs.get("interrupted") or
                (f"retry of {t.user_attrs['retry_of']}" if "retry_of" in t.user_attrs else ""))
        table.add_row(str(t.number), t.state.name.lower(), "-" if value is None else f"{value:.4g}",
                      *(format_value(t.params[k], short=True) if k in t.params else "-" for k in keys),
                      str(t.user_attrs.get("seconds", "-")), escape(str(note)))
    console = Console()
    console.print(table)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if not complete:
        print("no trial completed yet, so there is no best configuration")
        return
    best = study.best_trial
    print(f"best: trial {best.number}, {sweep.objective} {best.value:.4g} ({best.user_attrs.get('run')})")
    print(best_command(sweep, best))
