"""Helpers the test folders share (`from tests.helpers.cli import cli`), and where things are.

- `batch`: the contract of a native batch (E copies stepped together equal E single copies);
- `cli`: the `hdppo` command run in-process, with its output;
- `engine`: training and parameter-server helpers on the small `grid` scenario;
- `runtime`: a tiny trained run, and the team's and workers' actions on the same observations;
- `scripted_env`: a PettingZoo env with scripted rewards, to check the hierarchy's bookkeeping;
- `faults`: `hdppo` in its own process, to kill and signal.
- `tracking`: what a tracked run logged, read back (its CSV cells, W&B's offline log, TensorBoard hparams).
"""
from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]       # data next to the tests: fixtures/, scenarios_ok/, ...
ROOT = TESTS.parent                               # the repository

# The smallest training that still runs every part once on `grid`: one inline worker, two env copies,
# one gradient step per rollout of 16 steps (the `tiny` fixture hands out a copy).
TINY = {"backend": "inline", "workers": 1, "envs_per_worker": 2, "seed": 0, "rollout": 16, "epochs": 1,
        "minibatches": 1}

# The same on the command line, as flags and key=value pairs after `hdppo train SCENARIO`.
TINY_CLI = ["--backend", "inline", "--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=2",
            "rollout=16", "epochs=1", "minibatches=1"]


def needs(module: str, reason: str) -> pytest.MarkDecorator:
    """Skip where `module` is not installed, found without importing it: JaxMARL and RLlib take seconds to
    import, and every xdist worker collects every test module (`pytestmark = needs(...)`)."""
    return pytest.mark.skipif(find_spec(module) is None, reason=reason)


NEEDS_JAXMARL = needs("jaxmarl", "JaxMARL is not installed: pip install 'hdppo[smax]' (Python >= 3.11)")

# A test module that compiles JaxMARL envs: its tests share one xdist worker, so each env's jitted step
# compiles once per run (tests/conftest.py), and skip without the smax extra (`pytestmark = JAXMARL`).
JAXMARL = [pytest.mark.jaxmarl, NEEDS_JAXMARL]
