"""`hdppo eval`: play a run's team and report returns and outcome rates (hdppo.runtime.evaluate)."""
from __future__ import annotations

import argparse

from hdppo.cli.common import add_trust_flags, positive_int, seed_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", parents=parents,
                       help="play a run's trained team and report returns and win/success rates")
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("--episodes", type=positive_int, default=20)
    p.add_argument("--seed", type=seed_int, default=12345)
    p.add_argument("overrides", nargs="*", help="scenario config overrides, key=value (e.g. difficulty=0.8)")
    p.add_argument("--deterministic", action="store_true", help="greedy actions instead of sampling")
    p.add_argument("--checkpoint", choices=("latest", "best"), default="latest",
                   help="latest: the newest commit (default); best: RUN/best, the best evaluation during training")
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON (it is always written to RUN/eval.json)")
    p.add_argument("--allow-untrained", action="store_true",
                   help="evaluate even when a trained layer has no checkpoint (it then plays scripted or uniformly)")
    add_trust_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from hdppo.overrides import parse_assignments
    from hdppo.runtime.evaluate import evaluate, format_ci, save_eval
    res = evaluate(args.run, episodes=args.episodes, seed=args.seed, deterministic=args.deterministic,
                   overrides=parse_assignments(args.overrides), allow_untrained=args.allow_untrained,
                   trust_run=args.trust_run, scenario=args.scenario_file, checkpoint=args.checkpoint)
    path = save_eval(args.run, res)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    which = " best checkpoint," if args.checkpoint == "best" else ""
    table = Table(title=f"hdppo eval {args.run} ({which}{res['episodes']} episodes, mean [95% CI])")
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
