"""`hdppo train ... --seeds 0-4`: the same run once per seed, in sequence, into one seed group
folder (hdppo.analysis.seed_group): GROUP/seed_N, each a normal run folder, and GROUP/seeds.json.

Rerunning the same command, or `hdppo train --resume GROUP`, skips the finished seeds, resumes an
unfinished one from its newest commit and starts the rest; a seed that fails stops the group with
one error naming it, and the seeds before it stay as they are.
"""
from __future__ import annotations

import argparse
import shlex
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hdppo.cli.common import SEED_MAX, checkpoint_message
from hdppo.engine.checkpoint import CheckpointError
from hdppo.errors import ConfigError, HdppoError

MAX_SEEDS = 1_000
RunOne = Callable[[argparse.Namespace], int]
NOT_RECORDED = ("func", "argv", "debug", "resume")          # parsed arguments the manifest does not keep
NOT_COMPARED = ("out", "no_progress", "seeds")               # may differ when the same command is rerun
# what a run's flags are reset to when one seed is continued with `--resume GROUP/seed_N`
RESUME_RESET: dict[str, Any] = {"scenario": None, "overrides": [], "seed": None, "workers": None, "backend": None,
                                "schedule": None, "address": None, "config": None, "out": None, "load": None,
                                "layer": "all", "skills": False, "seeds": None,
                                "track": None}   # a resume keeps its tracking run


def seed_list(text: str) -> list[int]:
    """An argparse `type=`: seeds as ranges and single values, `0-4`, `0,2,5`, `0-2,7`; each once."""
    fix = f"pass at most {MAX_SEEDS:,} seeds as 0-4, 0,2,5 or 0-2,7 (whole numbers from 0)"
    seeds: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi if dash else lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is not a seed or a range of seeds\n  fix: {fix}") \
                from None
        if not 0 <= a <= b <= SEED_MAX:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is not a range from low to high within 0 to "
                                             f"{SEED_MAX:,}\n  fix: {fix}")
        if len(seeds) + b - a >= MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"{text!r} lists more than {MAX_SEEDS:,} seeds\n  fix: {fix}")
        seeds.extend(range(a, b + 1))
    twice = [s for s, n in Counter(seeds).items() if n > 1]
    if twice:
        raise argparse.ArgumentTypeError(f"lists seed {twice[0]} twice ({text})\n  fix: list each seed once")
    return seeds


def check_flags(args: argparse.Namespace) -> None:
    """--seeds sets the seed of every run: refused beside --seed, seed=, train.seed= or a --config
    seed, and beside --resume (a group continues with `--resume GROUP` alone)."""
    from hdppo.overrides import load_yaml, parse_assignments
    if args.resume:
        raise ConfigError("--seeds and --resume both given",
                          f"continue a seed group with `hdppo train --resume {args.resume}` alone")
    given = parse_assignments(args.overrides)
    from_config = load_yaml(args.config) if args.config else {}
    for where, value in (("--seed", args.seed), ("seed=", given.get("seed")), ("train.seed=", given.get("train.seed")),
                         (f"--config {args.config} (seed:)", from_config.get("seed", from_config.get("train.seed")))):
        if value is not None:
            raise ConfigError(f"--seeds and {where} both set the seed", f"drop {where.split()[0]}: --seeds gives "
                              "each run its seed")


def command_line(args: argparse.Namespace) -> str:
    words = [a for a in getattr(args, "argv", []) if a != "--debug"]
    return shlex.join(["hdppo", "train", *(words[1:] if words[:1] == ["train"] else words)])


def recorded(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k not in NOT_RECORDED}


def train_group(args: argparse.Namespace, run_one: RunOne) -> int:
    """Train every seed of `args.seeds` into one group folder, in sequence; `run_one` is `hdppo
    train`'s handler (cli/train.py), called with one run's arguments."""
    from hdppo.analysis.seed_group import is_group, read_manifest, write_manifest
    from hdppo.cli.common import out_folder
    check_flags(args)
    name = Path(args.scenario or "run").stem
    group = out_folder(args.out or Path("runs") / f"{name}-seeds-{time.strftime('%Y%m%d-%H%M%S')}")
    if is_group(group):
        before = read_manifest(group)
        now = recorded(args)
        if {k: v for k, v in before["args"].items() if k not in NOT_COMPARED} != \
                {k: v for k, v in now.items() if k not in NOT_COMPARED}:
            raise ConfigError(f"{group} holds the seed group of another command: {before['command']}",
                              f"rerun that command or `hdppo train --resume {group}` to continue it (more seeds "
                              "may be added to --seeds), or pass a new --out")
        dropped = [s for s in before["seeds"] if s not in args.seeds]
        if dropped:
            raise ConfigError(f"--seeds {', '.join(map(str, args.seeds))} leaves out seed {dropped[0]} of the group "
                              f"in {group}", "list every seed the group has, and any new ones")
        if args.seeds != before["seeds"]:
            write_manifest(group, args.seeds, command_line(args), now)
    elif group.is_dir() and any(group.iterdir()):
        raise ConfigError(f"{group} already exists and is not a seed group", "pass a new or empty --out")
    else:
        write_manifest(group, args.seeds, command_line(args), recorded(args))
    return _run_seeds(group, args, run_one)


def resume_group(args: argparse.Namespace, run_one: RunOne) -> int:
    """`hdppo train --resume GROUP`: the group's recorded command, continued."""
    from hdppo.analysis.seed_group import read_manifest
    group = Path(args.resume)
    given = [f"--{k}" for k in ("seed", "workers", "backend", "schedule", "address", "config", "out", "load", "steps",
                                "reinit", "track") if getattr(args, k, None)]
    given += ["the scenario"] * bool(args.scenario) + [repr(o) for o in args.overrides or []]
    if given:
        raise ConfigError(f"--resume {group} continues the seed group as its seeds.json records, so "
                          f"{', '.join(given)} would be ignored", "drop them, or start a new group with --out")
    manifest = read_manifest(group)
    stored = argparse.Namespace(**{**manifest["args"], "out": str(group), "resume": None, "func": args.func,
                                   "argv": getattr(args, "argv", []), "debug": args.debug})
    stored.no_progress = stored.no_progress or args.no_progress
    return _run_seeds(group, stored, run_one)


def _run_seeds(group: Path, args: argparse.Namespace, run_one: RunOne) -> int:
    from hdppo.analysis.seed_group import run_status, seed_folder
    seeds = list(args.seeds)
    print(f"seed group {group}: seeds {', '.join(map(str, seeds))}, one after another", flush=True)
    for i, seed in enumerate(seeds):
        run = seed_folder(group, seed)
        status = run_status(run)
        print(f"--- seed {seed} ({i + 1} of {len(seeds)}): {run}"
              + {"new": "", "finished": ": finished, kept", "unfinished": ": unfinished, resumed"}[status], flush=True)
        if status == "finished":
            continue
        one = argparse.Namespace(**vars(args))
        if status == "new":
            one.seeds, one.seed, one.out = None, str(seed), str(run)
        else:
            vars(one).update(RESUME_RESET, resume=str(run))
        try:
            rc = run_one(one)
        except (HdppoError, CheckpointError) as exc:
            msg = exc.message() if isinstance(exc, HdppoError) else checkpoint_message(exc)
            problem, _, fix = msg.partition("\n  fix: ")
            raise HdppoError(f"seed {seed} ({run}) failed: {problem}",
                             f"{fix or 'see above'}; seeds {_finished(group, seeds) or 'none'} are finished and "
                             f"kept, rerun the same command (or `hdppo train --resume {group}`) to continue") from exc
        if rc != 0:
            print(f"hdppo: seed {seed} stopped; continue the group with `hdppo train --resume {group}`", flush=True)
            return rc
    print(f"seed group {group}: {len(seeds)} seeds finished; evaluate with `hdppo eval {group}`, "
          f"plot with `hdppo plot {group}`", flush=True)
    return 0


def _finished(group: Path, seeds: list[int]) -> str:
    from hdppo.analysis.seed_group import run_status, seed_folder
    return ", ".join(str(s) for s in seeds if run_status(seed_folder(group, s)) == "finished")
