"""A drift probe: one arm of an evidence report re-run at a small budget, with its numbers recorded.

`python -m examples.studies.drift --write docs/evidence/drift-skirmish.json` trains the skirmish report's
flat arm (seed 0, the same settings, `epochs=4 lr_decay=true clip_vloss=false` pinned as in the
report, but `--steps 8192`, one
inline worker so it is deterministic) and records its eval (team return and win rate over 40
episodes) and a checksum of the trained parameters, with the provenance of the code.
tests/test_evidence_drift.py re-runs it and fails when the numbers moved: then the engine changed
what training does, and the evidence in docs/evidence must be re-run with the new code (and this
record rewritten) before the reports can be trusted again.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hdppo import provenance

PROBE: dict[str, Any] = {"scenario": "skirmish", "layers": "all",
                         "overrides": {"layers": 1, "steps": 8192, "seed": 0, "workers": 1, "backend": "inline",
                                       "envs_per_worker": 8, "epochs": 4, "lr_decay": True,
                                       "clip_vloss": False},
                         "eval": {"episodes": 40, "seed": 12345}}
OF_REPORT = "docs/evidence/skirmish.md (the flat arm, seed 0)"


def measure(folder: Path) -> dict[str, Any]:
    """Train the probe in `folder` and play it: per-episode team returns and wins, and their means."""
    from hdppo.engine.entry import train
    from hdppo.runtime.evaluate import play
    run = train(PROBE["scenario"], dict(PROBE["overrides"]), layers=PROBE["layers"], out=folder / "probe")
    records = play(run, PROBE["eval"]["episodes"], seed=PROBE["eval"]["seed"])
    from hdppo.engine.checkpoint import load_checkpoint
    tensors, _ = load_checkpoint(run / "checkpoints" / "low")
    checksum = float(sum(float(v.double().sum()) for _, v in sorted(tensors.items())))
    returns = np.array([r["team_return"] for r in records], dtype=float)
    wins = np.array([r.get("win", 0.0) for r in records], dtype=float)
    return {"team_return": float(returns.mean()), "team_return_se": float(returns.std(ddof=1) / np.sqrt(len(returns))),
            "win": float(wins.mean()), "win_se": float(wins.std(ddof=1) / np.sqrt(len(wins))),
            "episodes": len(records), "param_checksum": checksum}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", metavar="FILE", help="record the probe's numbers and provenance in FILE (JSON)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(tmp))
    record = {"probe": PROBE, "of_report": OF_REPORT, "result": result, "provenance": provenance.provenance(),
              "command": "python -m examples.studies.drift --write " + (args.write or "FILE")}
    print(json.dumps(result, indent=2))
    if args.write:
        Path(args.write).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
