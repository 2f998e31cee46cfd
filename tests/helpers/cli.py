"""Running the hdppo CLI in-process from tests."""
from __future__ import annotations

from hdppo.cli import main


def cli(capsys, *args: object) -> tuple[int, str, str]:
    """Run `hdppo ARGS` in this process: (exit code, stdout, stderr)."""
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:                  # argparse errors
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err
