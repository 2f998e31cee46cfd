"""The `hdppo` command: the parser made of the subcommands' own, and errors as one line.

Each subcommand is a module of hdppo.cli with `add(sub, parents)` (its parser) and `run(args)` (a
small handler that calls the package room doing the work); COMMANDS lists them in `--help` order.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hdppo.cli import bench, check, diagnose, export, plot, render, scenarios, sweep, train
from hdppo.cli import eval as eval_
from hdppo.cli.common import Parser, checkpoint_message, shared_flags
from hdppo.engine.checkpoint import CheckpointError
from hdppo.errors import HdppoError

COMMANDS = (scenarios, check, train, sweep, eval_, plot, export, render, diagnose, bench)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="hdppo", description="Hierarchical multi-agent teams trained with per-layer DPPO.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", required=True)
    parents = [shared_flags()]
    for command in COMMANDS:
        command.add(sub, parents)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one `hdppo: warning: ...` line on stderr (--debug keeps Python's own format)."""
    print(f"hdppo: warning: {message}", file=sys.stderr)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, parsed; key=value overrides may sit between options (`train grid --layer low
    lr=1e-3`). A bare word or an unknown option exits 2 with a usage error."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    words = [a for a in extra if not a.startswith("-") and "=" not in a and hasattr(args, "overrides")]
    if words:
        parser.exit(2, f"hdppo: error: argument {words[0]!r} is not of the form key=value\n"
                       f"  fix: write overrides as key=value (e.g. {words[0]}=VALUE), or put options before them\n")
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
    except SystemExit as stop:          # a usage error (2) or --help (0): an exit status, as for a failed run
        return int(stop.code or 0)
    args.argv = list(argv if argv is not None else sys.argv[1:])[1:]
    if not args.debug:
        import warnings
        warnings.showwarning = _show_warning
    try:
        return int(args.func(args) or 0)
    except (HdppoError, CheckpointError) as exc:
        if args.debug:
            raise
        msg = exc.message() if isinstance(exc, HdppoError) else checkpoint_message(exc)
        print(f"hdppo: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hdppo: interrupted", file=sys.stderr)
        return 130
