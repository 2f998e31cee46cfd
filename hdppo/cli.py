"""The `hdppo` command line: scenarios | check (train, eval, bench, plot come with the engine)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .errors import HdppoError


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from .scenario import _names, load_scenario
    table = Table(title="hdppo scenarios")
    table.add_column("name")
    table.add_column("description")
    for name in _names():
        try:
            sc = load_scenario(name)
            table.add_row(sc.name, sc.description)
        except HdppoError as exc:
            table.add_row(name, f"[red]does not load: {exc.problem}[/]")
    Console().print(table)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import print_report, run_check
    from .config import parse_assignments
    report = run_check(args.scenario, parse_assignments(args.overrides), episodes=args.episodes,
                       n_envs=args.envs, seed=args.seed)
    print_report(report)
    if not report.ok and args.debug:
        for line in report.lines:
            if not line.ok:
                print(line.detail, file=sys.stderr)
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hdppo", description="Hierarchical multi-agent teams trained with per-layer DPPO.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("scenarios", help="list the built-in scenarios")
    s.set_defaults(func=_cmd_scenarios)
    c = sub.add_parser("check", help="PettingZoo API test + hierarchy conformance of a scenario")
    c.add_argument("scenario", help="a scenario name (see `hdppo scenarios`) or a path to a scenario .py file")
    c.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    c.add_argument("--episodes", type=int, default=4, help="random-policy episodes for the conformance check")
    c.add_argument("--envs", type=int, default=2, help="env copies stepped together")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--debug", action="store_true", help="show full tracebacks")
    c.set_defaults(func=_cmd_check)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HdppoError as exc:
        if args.debug:
            raise
        print(f"hdppo: error: {exc.message()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hdppo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
