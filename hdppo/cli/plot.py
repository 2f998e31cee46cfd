"""`hdppo plot`: learning curves of runs as a PNG (hdppo.analysis.plot)."""
from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    # argparse %-formats help texts: a literal percent sign is written %%
    p = sub.add_parser("plot", parents=parents, help="learning curves of one or more runs as a PNG; runs differing "
                       "only in the seed are averaged with a 95%% band")
    p.add_argument("runs", nargs="+", help="run folders written by `hdppo train`, or seed group folders "
                   "(`hdppo train --seeds`: their runs, drawn as one group)")
    p.add_argument("--out", help="PNG file to write (default: RUN/curves.png, GROUP/curves.png, or the runs' "
                   "common folder)")
    p.add_argument("--metric", action="append", help="a column of RUN/metrics/run.csv or RUN/metrics/LAYER.csv, "
                   "e.g. win, team_return, entropy (repeatable; default return and goal_success)")
    p.add_argument("--layer", action="append", help="only these layers (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hdppo.analysis.plot import plot_runs
    out = plot_runs(args.runs, args.out, tuple(args.metric or ("return", "goal_success")), args.layer,
                    strict=bool(args.metric))
    print(f"wrote {out}")
    return 0
