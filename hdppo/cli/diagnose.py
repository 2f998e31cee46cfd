"""`hdppo diagnose`: per-layer PNGs of worker coverage and gradient agreement, and with --ablate a
re-training from 1..N of the run's workers (hdppo.analysis.diagnose, hdppo.analysis.ablate)."""
from __future__ import annotations

import argparse

from hdppo.cli.common import add_trust_flags, nonnegative_int, positive_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diagnose", parents=parents, help="one PNG per layer: workers' state embedding and "
                       "coverage, gradient cosine and divergence over training")
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("--out", help="folder for the PNGs (default RUN/diagnose)")
    p.add_argument("--steps", type=positive_int, default=100,
                   help="env steps each worker's envs are played to sample states")
    p.add_argument("--ablate", action="store_true", help="also re-train the run's config learning from 1..N of its "
                   "N workers' data and compare final team returns (do more workers help?)")
    p.add_argument("--ablate-steps", type=nonnegative_int, default=0,
                   help="env steps per ablation run (default: the run's budget, at most 100,000)")
    add_trust_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hdppo.runfolder import check_team, load_run_config, run_access
    check_team(args.run, load_run_config(args.run))        # the checkpoints the workers will build from
    with run_access(args.run, trust_run=args.trust_run, scenario=args.scenario_file):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdppo.analysis.ablate import ablate, ablation_plan
    from hdppo.analysis.diagnose import report
    from hdppo.cli.common import out_folder
    if args.out:
        out_folder(args.out)
    for path in report(args.run, args.out, args.steps):
        print(f"wrote {path}")
    if args.ablate:
        workers, steps = ablation_plan(args.run, args.ablate_steps)
        print(f"ablation: {workers} runs of {steps:,} env steps, learning from 1..{workers} of {workers} workers")
        summary = ablate(args.run, steps, workers, Path(args.out) / "ablate" if args.out else None)
        for r in summary["rows"]:
            print(f"  learning from {r['workers_learnt_from']} worker(s): final team return "
                  f"{r['final_team_return']:.3f} ({r['change_vs_all']:+.3f} vs all {workers})")
        print(f"wrote {Path(summary['rows'][0]['run']).parent / 'ablate.json'} and ablate.png")
    return 0
