"""`hdppo train`: flags and key=value pairs to a RunSpec, then the Trainer (hdppo.engine), or
`--resume RUN` to continue one."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from hdppo.cli.seeds import seed_list

if TYPE_CHECKING:
    from hdppo.engine.spec import RunSpec

FLAGS = ("steps", "seed", "workers", "backend", "schedule", "address", "track")     # flags that are train keys too


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    from hdppo.engine.tracking import TRACKERS
    p = sub.add_parser("train", parents=parents, help="train a scenario's layers with per-layer DPPO")
    p.add_argument("scenario", nargs="?", help="a scenario name or a path to a scenario .py file")
    p.add_argument("overrides", nargs="*", help="key=value: training keys (steps, envs_per_worker, ...), layer keys "
                   "for all layers (lr, rollout, mode, sync, ...) or LAYER.key, or scenario config keys")
    p.add_argument("--layer", default="all", help="layers to train: all, or names like low or mid,high")
    p.add_argument("--skills", action="store_true",
                   help="train a skill library: only the units, on their goal reward (w_ext 0, w_int 1 unless "
                        "given), under upper layers that sample goals (docs/skills.md)")
    p.add_argument("--schedule", choices=["concurrent", "bottom-up"],
                   help="how --layer all trains (default concurrent)")
    p.add_argument("--load", action="append", metavar="LAYER=PATH",
                   help="checkpoint for a layer: frozen if the layer is not trained, a warm start if it is")
    p.add_argument("--steps", help="env steps in all (every copy counts)")
    p.add_argument("--seed")
    p.add_argument("--seeds", type=seed_list, metavar="0-4|0,2,5",
                   help="train once per seed, in sequence, into one seed group folder (--out GROUP: GROUP/seed_N "
                        "and GROUP/seeds.json); rerun the same command or --resume GROUP to continue it")
    p.add_argument("--workers", help="worker processes (default: about 75%% of the cores)")
    p.add_argument("--backend", choices=["inline", "process", "ray"])
    p.add_argument("--address",
                   help="ray backend: join the Ray cluster at HOST:PORT (default: RAY_ADDRESS or a local Ray)")
    p.add_argument("--track", choices=TRACKERS, help="also log metrics, config and summary to W&B (offline) or "
                   "MLflow (a local store), in the run folder unless their env vars say otherwise")
    p.add_argument("--config", help="YAML file of overrides (key=value arguments win)")
    p.add_argument("--out", help="run folder (default runs/SCENARIO-TIME); must be new or empty")
    p.add_argument("--resume", metavar="RUN", help="continue the run in this folder from its newest commit")
    p.add_argument("--reinit", action="append", metavar="LAYER",
                   help="with --resume: re-create LAYER from random weights "
                        "(when its checkpoint is missing or damaged)")
    p.add_argument("--no-progress", action="store_true", help="print plain progress lines instead of a live table")
    p.add_argument("--trust-run", action="store_true",
                   help="with --resume: let the run folder's own copy of its scenario file (RUN/scenario.py) run")
    p.add_argument("--scenario", dest="scenario_file", metavar="NAME|PATH",
                   help="with --resume: continue with this scenario (e.g. its file, moved) instead of the recorded one")
    p.set_defaults(func=run)


def parse_loads(items: list[str] | None) -> dict[str, str]:
    """`--load LAYER=PATH` items as {layer: checkpoint folder}; PATH may be a run folder."""
    from hdppo.errors import ConfigError
    from hdppo.runfolder import checkpoint_arg
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--load {item!r} is not LAYER=PATH", "write --load low=runs/x/checkpoints/low")
        layer, path = item.split("=", 1)
        out[layer.strip()] = checkpoint_arg(path.strip(), layer.strip())
    return out


def train_spec(args: argparse.Namespace) -> RunSpec:
    """The RunSpec of `hdppo train SCENARIO ...`: flags and KEY=VALUE pairs, resolved once."""
    from hdppo.engine.spec import RunSpec
    from hdppo.errors import ConfigError
    from hdppo.overrides import load_yaml, parse_assignments
    if args.scenario is None:
        raise ConfigError("no scenario given", "run `hdppo train NAME|PATH` or `hdppo train --resume RUN`")
    overrides = load_yaml(args.config) if args.config else {}
    given = parse_assignments(args.overrides)
    flags = {flag: getattr(args, flag) for flag in FLAGS if getattr(args, flag) is not None}
    if args.no_progress:
        flags["progress"] = "lines"
    for key in given:                           # `steps=` and `train.steps=` are one key written twice
        short = key.partition(".")[2]
        if key.split(".")[0] in ("train", "scenario") and short in given:
            raise ConfigError(f"{short}={given[short]} and {key}={given[key]} both set {short!r}",
                              f"pass {short}=VALUE once")
    for key, value in flags.items():            # a flag and a key=value for one setting: neither silently wins
        for spelling in (key, f"train.{key}"):
            if spelling in given:
                flag = "--no-progress" if key == "progress" else f"--{key} {value}"
                raise ConfigError(f"{flag} and {spelling}={given[spelling]} both set {key!r}",
                                  f"pass only one of {flag.split()[0]} and {spelling}=")
    overrides.update(given)
    overrides.update(flags)
    spec = RunSpec.from_overrides(args.scenario, overrides, layers="all" if args.skills else args.layer,
                                  frozen=parse_loads(args.load), out=args.out)
    if args.skills:
        from hdppo.engine.skills import skill_spec
        return skill_spec(spec, args.layer)
    return spec


def resume_spec(args: argparse.Namespace) -> RunSpec:
    """The RunSpec of `--resume RUN`: everything from RUN/config.json; only --steps may change."""
    from hdppo.engine.spec import RunSpec
    from hdppo.errors import ConfigError
    given = [f"the scenario {args.scenario!r}"] if args.scenario else []
    given += [f"{a!r}" for a in args.overrides or []]
    given += [f"--{flag}" for flag in ("seed", "workers", "backend", "schedule", "address", "track", "config", "out",
                                       "load") if getattr(args, flag)]
    if args.layer != "all":
        given.append("--layer")
    if args.skills:
        given.append("--skills")
    if given:
        raise ConfigError(f"--resume continues {args.resume} exactly as its config.json says, so {', '.join(given)} "
                          "would be ignored", "drop them (only --steps, --reinit, --trust-run and --scenario go "
                          "with --resume), or start a new run with --out")
    from hdppo.runfolder import run_access
    with run_access(args.resume, trust_run=args.trust_run, scenario=args.scenario_file):
        return RunSpec.from_run(args.resume, steps=args.steps, progress="lines" if args.no_progress else None)


def stage_summary(stage: str, info: dict, resumed: bool = False) -> str:
    """One stage's closing line: this process's env steps, time and rate, and its PPO updates (one
    per layer batch learnt from, as in the budget table) and optimizer steps (Adam steps, the
    `optimizer_steps` column of the metrics); a resumed stage also gives the stage's whole count."""
    run_steps = info.get("env_steps_run", info["env_steps"])
    sps = run_steps / max(info["seconds"], 1e-9)
    line = f"stage {stage}: {run_steps:,} env steps in {info['seconds']:.1f} s ({sps:,.0f} steps/s)"
    if resumed and run_steps != info["env_steps"]:
        line += f" since the resume, {info['env_steps']:,} in all"
    line += f"; PPO updates {info['rounds']}, optimizer steps {info['optimizer_steps']}"
    if info.get("stopped_by"):
        line += f"; stopped early by {info['stopped_by']} (continue with --resume)"
    return line


def run(args: argparse.Namespace) -> int:
    import signal

    from rich.console import Console

    from hdppo.analysis.seed_group import is_group
    from hdppo.cli import seeds
    from hdppo.engine.budget import format_budget
    from hdppo.engine.trainer import RunInterrupted, Trainer
    from hdppo.errors import ConfigError
    from hdppo.runfolder import record_resolved, record_scenario
    if args.seeds is not None:
        return seeds.train_group(args, run)
    if args.resume and is_group(args.resume):
        return seeds.resume_group(args, run)
    console = Console()
    reinit = tuple(n.strip() for item in args.reinit or [] for n in item.split(",") if n.strip())
    if args.resume:
        spec = resume_spec(args)
        trainer = Trainer(spec, resume=True, reinit=reinit)
    else:
        for flag, given in (("--reinit", reinit), ("--trust-run", args.trust_run), ("--scenario", args.scenario_file)):
            if given:
                raise ConfigError(f"{flag} only goes with --resume", f"drop {flag}, or add --resume RUN")
        spec = train_spec(args)
        trainer = Trainer(spec)
        record_scenario(trainer.out, spec.scenario)     # eval / load / render work from any directory
        record_resolved(trainer.out, workers=spec.train.n_workers())
    console.print(f"[bold]hdppo train[/] {trainer.scenario.name}: layers {spec.layers} on "
                  f"{spec.train.n_workers()} {spec.train.backend} worker(s) x {spec.train.envs_per_worker} envs, "
                  f"{spec.train.steps:,} env steps, schedule {spec.train.schedule} -> {trainer.out}")
    if args.resume and trainer.commit is not None:
        dropped = sum(trainer.dropped_rows.values())
        console.print(f"resuming from commit {trainer.commit.number} at env step {trainer.commit.env_steps:,}"
                      + (f" ({dropped} metric rows written after it were cut)" if dropped else ""), highlight=False)
    for line in format_budget(trainer.budget):
        console.print(line, highlight=False)
    try:
        summary = trainer.run()
    except RunInterrupted as stop:
        where = (f"commit {stop.commit.number} at env step {stop.commit.env_steps:,}" if stop.commit
                 else "no commit")
        print(f"hdppo: stopped by {signal.Signals(stop.signum).name}; saved {where} in {trainer.out}; continue "
              f"with `hdppo train --resume {trainer.out}`", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        where = (f"the last commit ({trainer.commit.number}, env step {trainer.commit.env_steps:,}) stands"
                 if trainer.commit else "nothing was committed")
        print(f"hdppo: stopped at once by a second signal; {where}; continue with "
              f"`hdppo train --resume {trainer.out}`", file=sys.stderr)
        return 130
    for stage, info in summary.items():
        console.print(stage_summary(stage, info, resumed=bool(args.resume)), highlight=False)
    if not summary:
        console.print(f"nothing to do: the run has done its {spec.train.steps:,} env steps", highlight=False)
    console.print(f"run folder: {trainer.out}   evaluate with `hdppo eval {trainer.out}`")
    return 0
