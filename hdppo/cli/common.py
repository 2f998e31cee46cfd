"""What every subcommand shares: the flags of all of them, the range-checked number types of their
flags, and the one-line form of an error."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from hdppo.engine.checkpoint import CheckpointError

SEED_MAX = 2 ** 32 - 1          # seeds are derived per worker, layer and copy; this keeps every one in range


class Parser(argparse.ArgumentParser):
    """argparse, except that an error carrying its own fix line (a range-checked flag, see `int_in`)
    is the CLI's one `hdppo: error:` message and its fix, without the usage block; other usage
    errors keep argparse's form. Subcommands' parsers are of this class too (add_subparsers)."""

    def error(self, message: str) -> NoReturn:
        if "\n  fix: " in message:
            head, sep, rest = message.partition(": ")        # argparse's "argument --fps: must be ..."
            if head.startswith("argument ") and sep:
                message = f"{head.removeprefix('argument ')} {rest}"
            self.exit(2, f"hdppo: error: {message}\n")
        super().error(message)


def int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse `type=`: a whole number from `lo` to `hi` (no upper bound if None); anything else
    is one line naming the flag, the rule and the value (`--fps must be at least 1 (got 0)`)."""
    rule = f"at least {lo:,}" if hi is None else f"from {lo:,} to {hi:,}"
    fix = f"pass a whole number >= {lo:,}" if hi is None else f"pass a whole number from {lo:,} to {hi:,}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})\n  fix: {fix}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be {rule} (got {value})\n  fix: {fix}")
        return value
    parse.__name__ = f"int_in({lo}, {hi})"      # what argparse names in its own messages
    return parse


positive_int = int_in(1)
nonnegative_int = int_in(0)
seed_int = int_in(0, SEED_MAX)


def out_folder(path: str | Path, flag: str = "--out") -> Path:
    """A folder a command writes into: refused in one line when it, or a folder above it, is a file."""
    from hdppo.errors import ConfigError
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            problem = (f"{flag} {path} is a file, not a folder" if p == path
                       else f"{flag} {path} lies under {p}, which is a file")
            raise ConfigError(problem, f"pass a new or existing folder to {flag}")
    return path


def out_file(path: str | Path, flag: str = "--out", example: str = "out") -> Path:
    """A file a command writes: refused in one line when it is a folder or lies under a file."""
    from hdppo.errors import ConfigError
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder, not a file", f"pass a file name, e.g. {flag} {path / example}")
    out_folder(path.parent, flag)
    return path


def shared_flags() -> argparse.ArgumentParser:
    """The parent parser of every subcommand: `--debug` after the subcommand as well as before it
    (`hdppo --debug train ...` and `hdppo train ... --debug` both work; SUPPRESS keeps a subcommand
    from resetting what the top level set)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    return parent


def add_trust_flags(p: argparse.ArgumentParser) -> None:
    """--trust-run and --scenario: what a command that loads a run's scenario may run (docs/deploy.md)."""
    p.add_argument("--trust-run", action="store_true",
                   help="let the run folder's own copy of its scenario file (RUN/scenario.py) run; without it only "
                        "built-in or ./scenarios names, or the unchanged file the run was trained on, are loaded")
    p.add_argument("--scenario", dest="scenario_file", metavar="NAME|PATH",
                   help="load the run with this scenario (e.g. its file, moved) instead of the one it recorded")


def checkpoint_message(exc: CheckpointError) -> str:
    """A CheckpointError's 'problem; fix' text as the CLI's two lines: the problem, then `fix: ...`."""
    problem, sep, fix = str(exc).rpartition("; ")
    if not sep:
        return f"{exc}\n  fix: point --load or --resume at a checkpoint written by `hdppo train`"
    return f"{problem}\n  fix: {fix}"
