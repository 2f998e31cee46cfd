"""SIGKILL the driver at 20 seeded random moments of one run, 8 of them inside a commit (at a random
write step, through HDPPO_FAULT_WRITE), resume after each, and check that nothing was lost: every
CSV without a repeated or missing step, versions never going back, every resumed layer equal to the
commit it resumed, and the update counts of an uninterrupted run (exactly: sync mode keeps the
rollout phase)."""
from __future__ import annotations

import itertools
import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from hdppo.cli import main
from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.commit import list_commits, open_commit
from tests.helpers.faults import GRID, assert_consistent, launch, wait_for

STEPS = 8000
RUN = [*GRID, "--backend", "inline", "--workers", "2", "checkpoint_seconds=1", "checkpoint_every=4"]
KILLS = 20


def committed_versions(run: Path) -> dict[str, int]:
    c = open_commit(run, list_commits(run)[-1])
    return {layer: load_checkpoint(c.layer_dir(layer))[1]["version"] for layer in c.layers}


def assert_resumes_exactly(run: Path) -> int:
    """What a resume of `run` restores equals its newest commit, tensor for tensor; returns the commit."""
    from hdppo.engine.config import train_config_from_dict
    from hdppo.engine.server import ParameterServer
    from hdppo.engine.spec import RunSpec
    from hdppo.engine.trainer import Trainer
    from hdppo.runtime.evaluate import load_run_config
    config = load_run_config(run)
    tc = train_config_from_dict(config["train"])
    t = Trainer(RunSpec(config["scenario"], config["scenario_overrides"], tc, config["layers"], {}, run), resume=True)
    try:
        for layer in t.commit.layers:
            server = ParameterServer(t.infos[t.names.index(layer)], tc.layers[layer], seed=1)
            t._restore(server, layer)
            want, _ = load_checkpoint(t.commit.layer_dir(layer))
            got, _ = server.state()
            assert all(np.array_equal(got[k].numpy(), want[k].numpy()) for k in want), layer
        return t.commit.number
    finally:
        t.close()           # a Trainer holds the run's write lock until run() ends or close()


@pytest.mark.long(160)
def test_twenty_kills_lose_nothing(tmp_path, capsys):
    reference = tmp_path / "reference"
    assert main(["train", *RUN, "--steps", str(STEPS), "--out", str(reference)]) == 0
    capsys.readouterr()
    run = tmp_path / "run"
    rng = random.Random(2026)
    kills, inside_commit, resumed_from, versions = 0, 0, [], []
    first = True
    while kills < KILLS:
        args = ["train", *RUN, "--steps", STEPS, "--out", run] if first else ["train", "--resume", run]
        in_commit = kills % 5 in (1, 3)
        env = {"HDPPO_FAULT_WRITE": f"{rng.randint(1, 14)}:kill"} if in_commit else {}
        delay = rng.uniform(0.2, 2.5)
        log = tmp_path / f"run-{kills}.log"
        proc = launch(args, log, **env)
        wait_for(lambda: "env steps, schedule" in log.read_text(), 60, "the run to start", proc)
        if in_commit:
            rc = proc.wait(timeout=120)
            assert rc == 137, log.read_text()                  # os._exit(137) at the chosen write
            inside_commit += 1
        else:
            time.sleep(delay)
            assert proc.poll() is None, f"the run finished before kill {kills}: raise STEPS\n{log.read_text()}"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        kills += 1
        first = False
        if list_commits(run):
            versions.append(committed_versions(run))
            resumed_from.append(assert_resumes_exactly(run))
        else:
            first = True                                      # killed before its first commit: start it again
            import shutil
            shutil.rmtree(run, ignore_errors=True)
    for before, after in itertools.pairwise(versions):         # the newest commit never moves back
        assert all(after.get(k, 0) >= v for k, v in before.items()), (before, after)
    rc = main(["train", "--resume", str(run)])
    assert rc == 0, capsys.readouterr().err
    assert kills == KILLS and inside_commit == 8
    assert len(set(resumed_from)) > 5                          # the kills landed at many different points
    assert_consistent(run, reference)
    leftovers = [p for p in (run / "commits").iterdir() if p.name.startswith(".")]
    assert not leftovers
    print(f"\nfaults injected: {kills} SIGKILLs ({inside_commit} inside a commit), resumed from commits "
          f"{resumed_from}; updates per layer equal to the uninterrupted run")


@pytest.mark.long(40)
def test_a_kill_then_resume_never_moves_a_layer_back(tmp_path):
    """The issue's reproduction, with nothing but the CLI and the CSVs: SIGKILL a few seconds into a
    run whose layers have not been saved since the start, resume it, and no layer's version or step
    may go back (the old trainer re-created such layers from random weights but kept its step count)."""
    import subprocess
    import sys

    from tests.helpers.faults import column
    run, log = tmp_path / "run", tmp_path / "train.log"
    proc = launch(["train", *GRID, "--backend", "inline", "--workers", "2", "--steps", "8000", "log_every=1",
                   "checkpoint_every=1000", "--out", run], log)
    wait_for(lambda: (run / "metrics" / "high.csv").is_file() and len(column(run, "high", "step")) >= 3, 120,
             "three commander updates", proc)
    time.sleep(2.5)                                           # past a state save every log_every second
    assert proc.poll() is None, "the run finished before the kill: raise --steps"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    done = subprocess.run([sys.executable, "-m", "hdppo.cli", "train", "--resume", str(run)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert_consistent(run)
