"""`hdppo scenarios`: the scenarios this folder and the package offer."""
from __future__ import annotations

import argparse


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scenarios", parents=parents,
                       help="list the scenarios: ./scenarios/*.py of this folder, then the built-ins")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hdppo.errors import HdppoError
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
