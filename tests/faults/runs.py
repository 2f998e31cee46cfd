"""What several fault tests do with a launched `hdppo` process (tests.helpers.faults.launch)."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def finish(proc: subprocess.Popen, timeout: float, log: Path) -> int:
    """The exit code, or a failure (after killing the run's process group) if it has not ended within
    `timeout` seconds: a run that hangs fails its test instead of hanging it."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"the run did not end within {timeout} s:\n{log.read_text()[-2000:]}") from None


def error_lines(text: str) -> list[str]:
    """The `hdppo: error:` lines of a run's output."""
    return [line for line in text.splitlines() if line.startswith("hdppo: error:")]
