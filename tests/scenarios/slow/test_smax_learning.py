"""At the default config a flat team on SMAX 2s3z learns to win within 100k frames when the dead
stay in the team and keep the reward SMAX pays them (`dead_units=stay`, the default), and far less
when they leave the episode at their death (`dead_units=leave`, the baseline, measured in the same
test with everything else equal): a sacrifice is then credited with nothing the team earns after it.

Measured (seed 0, 2 workers): the training win rate over the last 20k frames was about 0.3-0.4
with `stay` and about 0.01 with `leave` on process workers, 0.27 and 0.00 inline (the test's
backend since 2026-12-03: one JAX process, not three, used ~20% less CPU); at 2M frames (seeds 0-2)
`leave` won 0.18, 0.76 and 0.75 of 100 episodes, `stay` 1.00, 0.99 and 1.00 (docs/evidence/smax.md)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jaxmarl", reason="JaxMARL is not installed: pip install 'hdppo[smax]' (Python >= 3.11)")

from hdppo.engine.metrics import read_csv
from tests.helpers.engine import train

STEPS = 102_400


def late_win_rate(out, **over) -> float:
    """The training win rate over the last 20% of the frames of a short default run on 2s3z."""
    train(out, ["low"], scenario="smax_2s3z", steps=STEPS, workers=2, backend="inline", progress="false", log_every=0,
          seed=0, **over)
    rows = [r for r in read_csv(out, "run") if np.isfinite(r.get("win", np.nan))]
    late = [r["win"] for r in rows if r["step"] > 0.8 * STEPS]
    assert late, rows[-3:]
    return float(np.mean(late))


def test_the_dead_staying_in_the_team_learns_to_win_2s3z(tmp_path):
    stay = late_win_rate(tmp_path / "stay")
    leave = late_win_rate(tmp_path / "leave", dead_units="leave")
    assert stay >= 0.15 and stay > leave + 0.1, (stay, leave)
