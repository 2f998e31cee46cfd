"""What every subcommand shares: the flags of all of them, and the one-line form of an error."""
from __future__ import annotations

import argparse

from hdppo.engine.checkpoint import CheckpointError


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
