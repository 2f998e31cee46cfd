"""`hdppo eval`: play a run's team and report returns and outcome rates (hdppo.runtime.evaluate)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hdppo.cli.common import add_trust_flags, positive_int, seed_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", parents=parents,
                       help="play a run's trained team and report returns and win/success rates")
    p.add_argument("run", help="a run folder written by `hdppo train`, or a seed group (`hdppo train --seeds`): "
                   "each seed's run, then the aggregate across seeds")
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
    p.add_argument("--uniform", action="append", default=[], metavar="LAYER",
                   help="LAYER acts uniformly at random instead of from its checkpoint or script (repeatable): "
                        "e.g. --uniform high, a random commander over the trained units")
    add_trust_flags(p)
    p.set_defaults(func=run)


def evaluate_run(args: argparse.Namespace, run: str | Path) -> tuple[dict[str, Any], Path]:
    """One run folder evaluated as the flags say, and written to RUN/eval.json."""
    from hdppo.overrides import parse_assignments
    from hdppo.runtime.evaluate import evaluate, save_eval
    res = evaluate(run, episodes=args.episodes, seed=args.seed, deterministic=args.deterministic,
                   overrides=parse_assignments(args.overrides), allow_untrained=args.allow_untrained,
                   trust_run=args.trust_run, scenario=args.scenario_file, checkpoint=args.checkpoint,
                   uniform=args.uniform)
    return res, save_eval(run, res)


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from hdppo.analysis.seed_group import is_group
    from hdppo.runtime.evaluate import format_ci
    if is_group(args.run):
        return run_group(args)
    res, path = evaluate_run(args, args.run)
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


def run_group(args: argparse.Namespace) -> int:
    """A seed group folder (`hdppo train --seeds`): each seed evaluated into its own eval.json, then a
    row per seed and the aggregate across seeds (mean with a t interval, IQM with a stratified-
    bootstrap interval), written to GROUP/eval.json."""
    import json

    from rich.console import Console
    from rich.table import Table

    from hdppo.analysis.seed_group import members, read_manifest
    from hdppo.analysis.seeds import aggregate_evals
    from hdppo.errors import ConfigError, HdppoError
    from hdppo.runtime.evaluate import format_ci, save_eval
    group = Path(args.run)
    runs = members(group)
    missing = [s for s in read_manifest(group)["seeds"] if s not in dict(runs)]
    if not runs:
        raise ConfigError(f"seed group {group} holds no started run yet", f"train it: `hdppo train --resume {group}`")
    per_seed: dict[int, dict[str, Any]] = {}
    for seed, run in runs:
        try:
            per_seed[seed], _ = evaluate_run(args, run)
        except HdppoError as exc:
            raise HdppoError(f"seed {seed} ({run}): {exc.problem}", exc.fix) from exc
    aggregate = aggregate_evals(per_seed)
    result = {"group": str(group), "seeds": list(per_seed), "missing_seeds": missing, "episodes": args.episodes,
              "seed": args.seed, "deterministic": args.deterministic, "aggregate": aggregate,
              "per_seed": {str(s): res for s, res in per_seed.items()}}
    path = save_eval(group, result)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    seeds = Table(title=f"hdppo eval {group}: each seed's mean over {args.episodes} episodes")
    seeds.add_column("seed")
    for key in aggregate:
        seeds.add_column(key, overflow="fold")
    for seed in per_seed:
        seeds.add_row(str(seed), *(f"{m['per_seed'][seed]:.3f}" if seed in m["per_seed"] else "-"
                                   for m in aggregate.values()))
    across = Table(title=f"across the {len(per_seed)} seeds (95% intervals)")
    across.add_column("metric")
    across.add_column("mean \\[t interval]")
    across.add_column("IQM \\[stratified bootstrap]")
    for key, m in aggregate.items():
        across.add_row(key, format_ci(m["mean"]), format_ci(m["iqm"]))
    console = Console()
    console.print(seeds)
    console.print(across)
    if missing:
        print(f"seeds with no run yet, left out: {', '.join(map(str, missing))}")
    print(f"wrote {path} (and each seed's eval.json)")
    return 0
