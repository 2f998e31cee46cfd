"""`hdppo bench`: throughput on this machine, and the learner's cost (hdppo.analysis.bench,
hdppo.analysis.bench_learner)."""
from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", parents=parents, help="throughput on spread: raw env, rollout, training (flat, "
                       "3-layer), RLlib PPO; the learner's cost on spread and VMAS balance")
    p.add_argument("overrides", nargs="*", help="bench settings key=value (workers, envs_per_worker, rollout, "
                   "updates, tasks, ...)")
    p.add_argument("--no-rllib", action="store_true", help="skip the RLlib PPO row")
    p.add_argument("--learner-only", action="store_true", help="only the learner rows (update cost against a bare "
                   "torch loop, training against rollout-only, where the time goes)")
    p.add_argument("--write", metavar="FILE", help="also write the markdown table to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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

    def log(message: str) -> None:
        print(message, flush=True)
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
