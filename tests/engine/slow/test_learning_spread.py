"""At the default config a flat team learns MPE simple_spread (3 agents, 25 cycles), the benchmark
a user compares with MAPPO first. Small seeded budget; the baseline is the same run that cannot
learn (lr ~ 0), measured in the same test.

Nothing is pinned: this guards the default. Here the default ends at -64.2 from -77.9 against the
frozen run's -76.9; the previous default (16 epochs with the learning rate decayed to 0 and an
unclipped value loss) ended at -80.3 and failed, as it learned little on this task at 300k steps
too (seeds 0-2: +22.7, +5.2, +6.0); see docs/engine.md."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.engine.config import resolve_overrides
from hdppo.engine.metrics import read_csv
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from hdppo.team.scenario import load_scenario

SPREAD = {"n_agents": "3", "squad_size": "3", "max_cycles": "25", "layers": "1"}


def final_team_return(out, **over) -> tuple[float, float]:
    keys = set(load_scenario("spread").make_config().__dataclass_fields__)
    cfg = {**SPREAD, "steps": "90000", "workers": "1", "envs_per_worker": "16", "backend": "inline",
           "progress": "false", "log_every": "0", "seed": "0", **over}
    tc, scen = resolve_overrides(cfg, ["low"], keys)
    Trainer(RunSpec("spread", scen, tc, ["low"], {}, out)).run()
    rows = [r["team_return"] for r in read_csv(out, "run") if np.isfinite(r.get("team_return", np.nan))]
    return rows[0], float(np.mean(rows[-5:]))


@pytest.mark.long(90)
def test_the_default_critic_learns_simple_spread(tmp_path):
    first, trained = final_team_return(tmp_path / "default")
    # the frozen run's return is the same at any length and any number of epochs (its policy cannot
    # move): a third of the steps and one epoch (-78.98 at 16 epochs and at 1, in 60 s against 10 s)
    _, frozen = final_team_return(tmp_path / "baseline", lr="1e-12", steps="30000", epochs="1")
    assert trained > frozen + 6.0, (first, trained, frozen)
    assert trained > first + 6.0, (first, trained, frozen)
