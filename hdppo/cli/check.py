"""`hdppo check`: PettingZoo's API test and the hierarchy's conformance over random episodes
(hdppo.team.check)."""
from __future__ import annotations

import argparse
import sys

from hdppo.cli.common import int_in, positive_int, seed_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", parents=parents, help="PettingZoo API test + hierarchy conformance of a scenario")
    p.add_argument("scenario", help="a scenario name (see `hdppo scenarios`) or a path to a scenario .py file")
    p.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    p.add_argument("--episodes", type=positive_int, default=4, help="random-policy episodes for the conformance check")
    p.add_argument("--envs", type=int_in(1, 1024), default=2, help="env copies stepped together (1 to 1024)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--config", help="YAML file of scenario config overrides (key=value arguments win)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hdppo.overrides import load_yaml, parse_assignments
    from hdppo.team.check import print_report, run_check
    overrides = load_yaml(args.config) if args.config else {}
    overrides.update(parse_assignments(args.overrides))
    report = run_check(args.scenario, overrides, episodes=args.episodes, n_envs=args.envs, seed=args.seed)
    print_report(report)
    if not report.ok and args.debug:
        for line in report.lines:
            if not line.ok:
                print(line.trace or line.detail, file=sys.stderr)
    return 0 if report.ok else 1
