"""The `hdppo` command line: scenarios | check | train | eval | plot | export | render | diagnose | bench.

`main(argv)` runs it (the `hdppo` script; `python -m hdppo.cli`); hdppo/cli/app.py builds the
parser from one module per subcommand.
"""
from __future__ import annotations

from hdppo.cli.app import build_parser, main, parse

__all__ = ["build_parser", "main", "parse"]
