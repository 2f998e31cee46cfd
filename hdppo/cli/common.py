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


def checkpoint_message(exc: CheckpointError) -> str:
    """A CheckpointError's 'problem; fix' text as the CLI's two lines: the problem, then `fix: ...`."""
    problem, sep, fix = str(exc).rpartition("; ")
    if not sep:
        return f"{exc}\n  fix: point --load or --resume at a checkpoint written by `hdppo train`"
    return f"{problem}\n  fix: {fix}"
