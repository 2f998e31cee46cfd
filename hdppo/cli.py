"""The `hdppo` command line: scenarios | check | train | eval | plot | export | render | bench."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hdppo.engine.checkpoint import CheckpointError
from hdppo.errors import HdppoError


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hdppo.team.scenario import load_scenario, scenario_names
    table = Table(title="hdppo scenarios")
    table.add_column("name")
    table.add_column("from")
    table.add_column("description")
    for name, where in scenario_names():
        try:
            sc = load_scenario(name)
            table.add_row(name, where, sc.description)
        except HdppoError as exc:
            table.add_row(name, where, f"[red]does not load: {exc.problem}[/]")
    Console().print(table)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from hdppo.overrides import load_yaml, parse_assignments
    from hdppo.team.check import print_report, run_check
    overrides = load_yaml(args.config) if args.config else {}
    overrides.update(parse_assignments(args.overrides))
    report = run_check(args.scenario, overrides, episodes=args.episodes,
                       n_envs=args.envs, seed=args.seed)
    print_report(report)
    if not report.ok and args.debug:
        for line in report.lines:
            if not line.ok:
                print(line.trace or line.detail, file=sys.stderr)
    return 0 if report.ok else 1


def _parse_loads(items: list[str]) -> dict[str, str]:
    from hdppo.errors import ConfigError
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--load {item!r} is not LAYER=PATH", "write --load low=runs/x/checkpoints/low")
        from hdppo.runfolder import checkpoint_arg
        layer, path = item.split("=", 1)
        out[layer.strip()] = checkpoint_arg(path.strip(), layer.strip())   # a run folder or a checkpoint
    return out


def train_spec(args: argparse.Namespace):
    """The RunSpec of `hdppo train SCENARIO ...`: flags and KEY=VALUE pairs, resolved once."""
    from hdppo.engine.spec import RunSpec
    from hdppo.errors import ConfigError
    from hdppo.overrides import load_yaml, parse_assignments
    if args.scenario is None:
        raise ConfigError("no scenario given", "run `hdppo train NAME|PATH` or `hdppo train --resume RUN`")
    overrides = load_yaml(args.config) if args.config else {}
    overrides.update(parse_assignments(args.overrides))
    for flag in ("steps", "seed", "workers", "backend", "schedule", "address"):
        value = getattr(args, flag)
        if value is not None:
            overrides[flag] = value
    if args.no_progress:
        overrides["progress"] = "false"
    return RunSpec.from_overrides(args.scenario, overrides, layers=args.layer, frozen=_parse_loads(args.load),
                                  out=args.out)


def _resume_spec(args: argparse.Namespace):
    """The RunSpec of `--resume RUN`: everything from RUN/config.json, only --steps may change."""
    from pathlib import Path

    from hdppo.engine.config import check_train_config, train_config_from_dict
    from hdppo.engine.spec import RunSpec
    from hdppo.errors import ConfigError
    from hdppo.overrides import coerce
    from hdppo.runfolder import load_run_config, resolve_scenario
    given = [f"the scenario {args.scenario!r}"] if args.scenario else []
    given += [f"{a!r}" for a in args.overrides or []]
    given += [f"--{flag}" for flag in ("seed", "workers", "backend", "schedule", "address", "config", "out", "load")
              if getattr(args, flag)]
    if args.layer != "all":
        given.append("--layer")
    if given:
        raise ConfigError(f"--resume continues {args.resume} exactly as its config.json says, so {', '.join(given)} "
                          "would be ignored", "drop them (only --steps and --reinit go with --resume), or start a "
                          "new run with --out")
    config = load_run_config(args.resume)
    tc = train_config_from_dict(config["train"])
    if args.steps is not None:
        tc.steps = coerce(args.steps, int, "steps")
    if args.no_progress:
        tc.progress = False
    check_train_config(tc)
    return RunSpec(resolve_scenario(args.resume, config), config["scenario_overrides"], tc, config["layers"],
                   config["frozen"], Path(args.resume))


def _cmd_train(args: argparse.Namespace) -> int:
    import signal

    from rich.console import Console

    from hdppo.engine.trainer import RunInterrupted, Trainer
    console = Console()
    reinit = tuple(n.strip() for item in args.reinit or [] for n in item.split(",") if n.strip())
    if args.resume:
        spec = _resume_spec(args)
        trainer = Trainer(spec, resume=True, reinit=reinit)
    else:
        if reinit:
            from hdppo.errors import ConfigError
            raise ConfigError("--reinit only goes with --resume", "drop --reinit, or add --resume RUN")
        from hdppo.runfolder import record_resolved, record_scenario
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
    from hdppo.engine.budget import format_budget
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
        sps = info["env_steps"] / max(info["seconds"], 1e-9)
        console.print(f"stage {stage}: {info['env_steps']:,} env steps in {info['seconds']:.1f} s "
                      f"({sps:,.0f} steps/s), PPO updates {info['rounds']} (optimizer steps "
                      f"{info['updates']})", highlight=False)
    if not summary:
        console.print(f"nothing to do: the run has done its {spec.train.steps:,} env steps", highlight=False)
    console.print(f"run folder: {trainer.out}   evaluate with `hdppo eval {trainer.out}`")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from hdppo.overrides import parse_assignments
    from hdppo.runtime.evaluate import evaluate, format_ci, save_eval
    res = evaluate(args.run, episodes=args.episodes, seed=args.seed, deterministic=args.deterministic,
                   overrides=parse_assignments(args.overrides), allow_untrained=args.allow_untrained)
    path = save_eval(args.run, res)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    table = Table(title=f"hdppo eval {args.run} ({res['episodes']} episodes, mean [95% CI])")
    table.add_column("metric")
    table.add_column("value")
    for layer, ci in res["layers"].items():
        table.add_row(f"return/{layer} ({res['acting'][layer]})", format_ci(ci))
    table.add_row("team return", format_ci(res["team_return"]))
    table.add_row("episode length", format_ci(res["length"]))
    for key, ci in res["outcomes"].items():
        table.add_row(f"{key} rate" if key in ("win", "success", "draw") else key, format_ci(ci))
    Console().print(table)
    print(f"wrote {path}")
    return 0


def _checkpoint_message(exc: CheckpointError) -> str:
    """A CheckpointError's 'problem; fix' text as the CLI's two lines: the problem, then `fix: ...`."""
    problem, sep, fix = str(exc).rpartition("; ")
    if not sep:
        return f"{exc}\n  fix: point --load or --resume at a checkpoint written by `hdppo train`"
    return f"{problem}\n  fix: {fix}"


def _cmd_plot(args: argparse.Namespace) -> int:
    from hdppo.analysis.plot import plot_runs
    out = plot_runs(args.runs, args.out, tuple(args.metric or ("return", "goal_success")), args.layer,
                    strict=bool(args.metric))
    print(f"wrote {out}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdppo.runtime.export import export_team
    out = Path(args.out) if args.out else Path(args.run) / "export"
    path = export_team(args.run, out, args.format, args.opset)
    print(f"wrote {path} and the layers' {args.format} models next to it")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from hdppo.overrides import parse_assignments
    from hdppo.runtime.render import render_episodes
    out, frames = render_episodes(args.run, args.out, args.episodes, parse_assignments(args.overrides),
                                  max_steps=args.max_steps, every=args.every, fps=args.fps, pixels=args.pixels,
                                  deterministic=not args.sample, seed=args.seed)
    print(f"wrote {out} ({frames} frames)")
    return 0


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from hdppo.analysis.diagnose import report
    for path in report(args.run, args.out, args.steps):
        print(f"wrote {path}")
    if args.ablate:
        from pathlib import Path

        from hdppo.analysis.ablate import ablate
        from hdppo.analysis.diagnose import run_workers
        from hdppo.errors import ConfigError
        from hdppo.runfolder import load_run_config
        config = load_run_config(args.run)
        workers = run_workers(args.run, config)
        steps = args.ablate_steps or min(int(config["train"]["steps"]), 100_000)
        if steps < 1:
            raise ConfigError(f"--ablate-steps {steps} is not a budget", "pass --ablate-steps N with N >= 1")
        print(f"ablation: {workers} runs of {steps:,} env steps, learning from 1..{workers} of {workers} workers")
        out = Path(args.out) / "ablate" if args.out else None
        summary = ablate(args.run, steps, workers, out)
        for r in summary["rows"]:
            print(f"  learning from {r['workers_learnt_from']} worker(s): final team return "
                  f"{r['final_team_return']:.3f} ({r['change_vs_all']:+.3f} vs all {workers})")
        print(f"wrote {Path(summary['rows'][0]['run']).parent / 'ablate.json'} and ablate.png")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    import dataclasses
    import shlex
    from pathlib import Path

    from hdppo.analysis import bench_learner
    from hdppo.analysis.bench import BenchConfig, markdown, run_benchmark
    from hdppo.overrides import apply_overrides, parse_assignments
    cfg = apply_overrides(BenchConfig(), parse_assignments(args.overrides), what="bench config")
    if args.no_rllib:
        cfg = dataclasses.replace(cfg, rllib=False)
    bench_learner.tasks_of(cfg)                 # refuse an unknown task before anything runs
    log = lambda m: print(m, flush=True)  # noqa: E731
    command = ("hdppo bench " + " ".join(shlex.quote(a) for a in args.argv)).strip()
    parts = []
    if not args.learner_only:
        parts.append(markdown(run_benchmark(cfg, log=log), cfg, command))
    parts.append(bench_learner.markdown(bench_learner.run_learner(cfg, log=log), cfg, command))
    text = "\n".join(parts)
    print(text)
    if args.write:
        Path(args.write).write_text(text)
        print(f"wrote {args.write}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hdppo", description="Hierarchical multi-agent teams trained with per-layer DPPO.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("scenarios", help="list the scenarios: ./scenarios/*.py of this folder, then the built-ins")
    s.set_defaults(func=_cmd_scenarios)
    c = sub.add_parser("check", help="PettingZoo API test + hierarchy conformance of a scenario")
    c.add_argument("scenario", help="a scenario name (see `hdppo scenarios`) or a path to a scenario .py file")
    c.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    c.add_argument("--episodes", type=int, default=4, help="random-policy episodes for the conformance check")
    c.add_argument("--envs", type=int, default=2, help="env copies stepped together")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--config", help="YAML file of scenario config overrides (key=value arguments win)")
    c.add_argument("--debug", action="store_true", help="show full tracebacks")
    c.set_defaults(func=_cmd_check)

    t = sub.add_parser("train", help="train a scenario's layers with per-layer DPPO")
    t.add_argument("scenario", nargs="?", help="a scenario name or a path to a scenario .py file")
    t.add_argument("overrides", nargs="*", help="key=value: training keys (steps, envs_per_worker, ...), layer keys "
                   "for all layers (lr, rollout, mode, sync, ...) or LAYER.key, or scenario config keys")
    t.add_argument("--layer", default="all", help="layers to train: all, or names like low or mid,high")
    t.add_argument("--schedule", choices=["concurrent", "bottom-up"],
                   help="how --layer all trains (default concurrent)")
    t.add_argument("--load", action="append", metavar="LAYER=PATH",
                   help="checkpoint for a layer: frozen if the layer is not trained, a warm start if it is")
    t.add_argument("--steps", help="env steps in all (every copy counts)")
    t.add_argument("--seed")
    t.add_argument("--workers", help="worker processes (default: about 75%% of the cores)")
    t.add_argument("--backend", choices=["inline", "process", "ray"])
    t.add_argument("--address",
                   help="ray backend: join the Ray cluster at HOST:PORT (default: RAY_ADDRESS or a local Ray)")
    t.add_argument("--config", help="YAML file of overrides (key=value arguments win)")
    t.add_argument("--out", help="run folder (default runs/SCENARIO-TIME); must be new or empty")
    t.add_argument("--resume", metavar="RUN", help="continue the run in this folder from its newest commit")
    t.add_argument("--reinit", action="append", metavar="LAYER",
                   help="with --resume: re-create LAYER from random weights "
                        "(when its checkpoint is missing or damaged)")
    t.add_argument("--no-progress", action="store_true", help="print plain progress lines instead of a live table")
    t.add_argument("--debug", action="store_true", help="show full tracebacks")
    t.set_defaults(func=_cmd_train)

    e = sub.add_parser("eval", help="play a run's trained team and report returns and win/success rates")
    e.add_argument("run", help="a run folder written by `hdppo train`")
    e.add_argument("--episodes", type=int, default=20)
    e.add_argument("--seed", type=int, default=12345)
    e.add_argument("overrides", nargs="*", help="scenario config overrides, key=value (e.g. difficulty=0.8)")
    e.add_argument("--deterministic", action="store_true", help="greedy actions instead of sampling")
    e.add_argument("--json", action="store_true",
                   help="print the result as JSON (it is always written to RUN/eval.json)")
    e.add_argument("--allow-untrained", action="store_true",
                   help="evaluate even when a trained layer has no checkpoint (it then plays scripted or uniformly)")
    e.add_argument("--debug", action="store_true", help="show full tracebacks")
    e.set_defaults(func=_cmd_eval)

    pl = sub.add_parser("plot", help="learning curves of one or more runs as a PNG; runs differing only in "
                        "the seed are averaged with a 95% band")
    pl.add_argument("runs", nargs="+", help="run folders written by `hdppo train`")
    pl.add_argument("--out", help="PNG file to write (default: RUN/curves.png, or the runs' common folder)")
    pl.add_argument("--metric", action="append", help="a column of RUN/metrics/run.csv or RUN/metrics/LAYER.csv, "
                    "e.g. win, team_return, entropy (repeatable; default return and goal_success)")
    pl.add_argument("--layer", action="append", help="only these layers (repeatable)")
    pl.add_argument("--debug", action="store_true", help="show full tracebacks")
    pl.set_defaults(func=_cmd_plot)

    x = sub.add_parser("export",
                       help="each trained layer's actor as ONNX (or TorchScript) plus a manifest of the hierarchy")
    x.add_argument("run", help="a run folder written by `hdppo train`")
    x.add_argument("--format", default="onnx", help="onnx (default) or torchscript")
    x.add_argument("--out", help="folder to write (default RUN/export)")
    x.add_argument("--opset", type=int, default=18, help="ONNX opset")
    x.add_argument("--debug", action="store_true", help="show full tracebacks")
    x.set_defaults(func=_cmd_export)

    r = sub.add_parser("render", help="play a run's team and write the episodes as a GIF or MP4 (squads, goals)")
    r.add_argument("run", help="a run folder written by `hdppo train`")
    r.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    r.add_argument("--out", default="episode.gif", help="episode.gif or episode.mp4 (MP4 needs imageio-ffmpeg)")
    r.add_argument("--episodes", type=int, default=1)
    r.add_argument("--max-steps", type=int, default=1000, help="stop an episode after this many steps")
    r.add_argument("--every", type=int, default=1, help="draw every Nth step")
    r.add_argument("--fps", type=int, default=10)
    r.add_argument("--pixels", type=int, default=320, help="frame width and height")
    r.add_argument("--seed", type=int, default=0, help="episode k resets the env with seed + k")
    r.add_argument("--sample", action="store_true", help="sample actions instead of the most likely")
    r.add_argument("--debug", action="store_true", help="show full tracebacks")
    r.set_defaults(func=_cmd_render)

    dg = sub.add_parser("diagnose", help="one PNG per layer: workers' state embedding and coverage, gradient "
                        "cosine and divergence over training")
    dg.add_argument("run", help="a run folder written by `hdppo train`")
    dg.add_argument("--out", help="folder for the PNGs (default RUN/diagnose)")
    dg.add_argument("--steps", type=int, default=100, help="env steps each worker's envs are played to sample states")
    dg.add_argument("--ablate", action="store_true", help="also re-train the run's config learning from 1..N of its "
                    "N workers' data and compare final team returns (do more workers help?)")
    dg.add_argument("--ablate-steps", type=int, default=0, help="env steps per ablation run (default: the run's "
                    "budget, at most 100,000)")
    dg.add_argument("--debug", action="store_true", help="show full tracebacks")
    dg.set_defaults(func=_cmd_diagnose)

    b = sub.add_parser("bench", help="throughput on spread: raw env, rollout, training (flat, 3-layer), RLlib PPO; "
                       "the learner's cost on spread and VMAS balance")
    b.add_argument("overrides", nargs="*", help="bench settings key=value (workers, envs_per_worker, rollout, "
                   "updates, tasks, ...)")
    b.add_argument("--no-rllib", action="store_true", help="skip the RLlib PPO row")
    b.add_argument("--learner-only", action="store_true", help="only the learner rows (update cost against a bare "
                   "torch loop, training against rollout-only, where the time goes)")
    b.add_argument("--write", metavar="FILE", help="also write the markdown table to FILE")
    b.add_argument("--debug", action="store_true", help="show full tracebacks")
    b.set_defaults(func=_cmd_bench)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one `hdppo: warning: ...` line on stderr (--debug keeps Python's own format)."""
    print(f"hdppo: warning: {message}", file=sys.stderr)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, parsed; key=value overrides may sit between options (`train grid --layer low
    lr=1e-3`). A bare word or an unknown option exits 2 with a usage error."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    words = [a for a in extra if not a.startswith("-") and "=" not in a and hasattr(args, "overrides")]
    if words:
        parser.exit(2, f"hdppo: error: argument {words[0]!r} is not of the form key=value\n"
                       f"  fix: write overrides as key=value (e.g. {words[0]}=VALUE), or put options before them\n")
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as stop:          # a usage error (2) or --help (0): an exit status, as for a failed run
        return int(stop.code or 0)
    args.argv = list(argv if argv is not None else sys.argv[1:])[1:]
    if not args.debug:
        import warnings
        warnings.showwarning = _show_warning
    try:
        return int(args.func(args) or 0)
    except (HdppoError, CheckpointError) as exc:
        if args.debug:
            raise
        msg = exc.message() if isinstance(exc, HdppoError) else _checkpoint_message(exc)
        print(f"hdppo: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hdppo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
