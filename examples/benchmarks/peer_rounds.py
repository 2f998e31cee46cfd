"""Peer rounds against the server's rounds: the wall-clock of a sync gradients update, side by side.

    python examples/benchmarks/peer_rounds.py                                  # smax_2s3z and spread
    python examples/benchmarks/peer_rounds.py --scenarios smax_3s5z --steps 131072 --repeats 5

Each repeat trains the same short run (the scenario's defaults, `--layer all`, the process backend,
seed 0) twice, once with peer rounds (the default) and once with `HDPPO_PEER_ROUNDS=0`, the order
alternating between repeats so the machine's drift falls on both arms. A run's time per update is
its steady state: the wall-clock between the first and the last row of its bottom layer's metrics
(one row per update) over the updates between them, so start-up and the first (compiling) update
do not count. The weights of the two arms are equal bit for bit (tests/engine/test_peer_rounds.py);
the script checks it again on each pair's final commit. Prints per repeat: ms per update of each arm
and their ratio, then the median ratio and its range. Run it alone on the machine.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import tempfile
import warnings
from pathlib import Path

import torch

from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.commit import list_commits, open_commit
from hdppo.engine.peers import ENV_SWITCH
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer


def steady_ms_per_update(run: Path, layer: str) -> float:
    rows = list(csv.DictReader(open(run / "metrics" / f"{layer}.csv")))
    if len(rows) < 3:
        raise SystemExit(f"{run}: {len(rows)} updates of {layer}; give --steps for at least 3")
    t = [float(r["wall_time"]) for r in rows]
    return (t[-1] - t[1]) / (len(t) - 2) * 1000       # from the second update: the first one compiles


def train(scenario: str, steps: int, out: Path, peer: bool) -> tuple[float, dict[str, dict]]:
    os.environ[ENV_SWITCH] = "1" if peer else "0"
    spec = RunSpec.from_overrides(scenario, {"steps": str(steps), "seed": "0", "progress": "off",
                                             "backend": "process"}, layers="all", out=out)
    trainer = Trainer(spec)
    trainer.run()
    bottom = spec.layer_infos()[-1].name
    commit = open_commit(out, list_commits(out)[-1])
    tensors = {layer: load_checkpoint(commit.layer_dir(layer))[0] for layer in commit.layers}
    return steady_ms_per_update(out, bottom), tensors


def same(a: dict[str, dict], b: dict[str, dict]) -> bool:
    return a.keys() == b.keys() and all(a[k].keys() == b[k].keys() and all(torch.equal(a[k][t], b[k][t])
                                                                       for t in a[k]) for k in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default="smax_2s3z,spread", help="comma-separated built-in scenarios")
    ap.add_argument("--steps", type=int, default=65536, help="env steps per run (default 65536: 32 updates)")
    ap.add_argument("--repeats", type=int, default=3, help="pairs of runs per scenario (default 3)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="layer .* gets")      # short runs' budget advice: not about speed
    tmp = Path(tempfile.mkdtemp(prefix="peer-rounds-"))
    try:
        for scenario in args.scenarios.split(","):
            ratios = []
            print(f"{scenario}: {args.steps} steps a run, ms per update (steady state)")
            for r in range(args.repeats):
                order = (True, False) if r % 2 == 0 else (False, True)
                ms, weights = {}, {}
                for peer in order:
                    out = tmp / f"{scenario}-{r}-{'peer' if peer else 'server'}"
                    ms[peer], weights[peer] = train(scenario, args.steps, out, peer)
                    shutil.rmtree(out, ignore_errors=True)
                ratios.append(ms[True] / ms[False])
                print(f"  repeat {r}: peer rounds {ms[True]:7.1f}  server rounds {ms[False]:7.1f}  ratio "
                      f"{ratios[-1]:.3f}  weights {'equal' if same(weights[True], weights[False]) else 'DIFFER'}",
                      flush=True)
            print(f"  median ratio {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}; "
                  "below 1: peer rounds are faster)")
    finally:
        os.environ.pop(ENV_SWITCH, None)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
