"""`hdppo bench`: throughput on this machine, and the learner's cost (hdppo.analysis.bench,
hdppo.analysis.bench_learner); with --act, a trained team's act latency (hdppo.analysis.bench_act)."""
from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", parents=parents, help="throughput on spread: raw env, rollout, training (flat, "
                       "3-layer), RLlib PPO; the learner's cost on spread and VMAS balance")
    p.add_argument("overrides", nargs="*", help="bench settings key=value (workers, envs_per_worker, rollout, "
                   "updates, tasks, compile_bare=true to time the bare loop under torch.compile too, ...; "
                   "with --act: run, steps, repeats, threads, train_steps)")
    p.add_argument("--no-rllib", action="store_true", help="skip the RLlib PPO row")
    p.add_argument("--learner-only", action="store_true", help="only the learner rows (update cost against a bare "
                   "torch loop, training against rollout-only, where the time goes)")
    p.add_argument("--act", action="store_true", help="only the act-latency rows: a trained skirmish team's "
                   "act per env step, torch and ONNX (run=PATH measures that run, else the bench trains a short one)")
    p.add_argument("--write", metavar="FILE", help="also write the markdown table to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shlex
    from pathlib import Path

    from hdppo.overrides import parse_assignments
    command = ("hdppo bench " + " ".join(shlex.quote(a) for a in args.argv)).strip()
    overrides = parse_assignments(args.overrides)
    text = "\n".join(_act_tables(overrides, command) if args.act else _throughput_tables(args, overrides, command))
    print(text)
    if args.write:
        Path(args.write).write_text(text)
        print(f"wrote {args.write}")
    return 0


def _log(message: str) -> None:
    print(message, flush=True)


def _throughput_tables(args: argparse.Namespace, overrides: dict, command: str) -> list[str]:
    """The spread throughput rows (unless --learner-only), then the learner rows."""
    import dataclasses

    from hdppo.analysis import bench_learner
    from hdppo.analysis.bench import BenchConfig, markdown, run_benchmark
    from hdppo.overrides import apply_overrides
    cfg = apply_overrides(BenchConfig(), overrides, what="bench config")
    if args.no_rllib:
        cfg = dataclasses.replace(cfg, rllib=False)
    bench_learner.tasks_of(cfg)                 # refuse an unknown task before anything runs
    parts = []
    if not args.learner_only:
        parts.append(markdown(run_benchmark(cfg, log=_log), cfg, command))
    parts.append(bench_learner.markdown(bench_learner.run_learner(cfg, log=_log), cfg, command))
    return parts


def _act_tables(overrides: dict, command: str) -> list[str]:
    """The act-latency rows (hdppo.analysis.bench_act)."""
    from hdppo.analysis import bench_act
    from hdppo.overrides import apply_overrides
    cfg = apply_overrides(bench_act.ActBenchConfig(), overrides, what="act bench config")
    return [bench_act.markdown(bench_act.run_act_bench(cfg, log=_log), cfg, command)]
