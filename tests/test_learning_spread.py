"""With the default critic (centralized, value_norm) and `epochs=4`, a flat team learns MPE
simple_spread (3 agents, 25 cycles), the benchmark a user compares with MAPPO first. Small seeded
budget; the baseline is the same run that cannot learn (lr ~ 0), measured in the same test.

`epochs=4`, not the default 16: on this task at this budget 16 epochs learn less and less reliably
(final minus first return over seeds 0-4: -2.4, +21.5, -4.9, -7.5, +12.3 against 4 epochs' +14.7,
+17.4, +3.5, +12.4, -8.8; see docs/evidence/README.md), so a test of the default here would test
luck. Where 16 helps (the VMAS tasks, skirmish) is measured in docs/evidence."""
from __future__ import annotations

import numpy as np

from hdppo.engine.config import resolve_overrides
from hdppo.engine.metrics import read_csv
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from hdppo.team.scenario import load_scenario

SPREAD = {"n_agents": "3", "squad_size": "3", "max_cycles": "25", "layers": "1", "epochs": "4"}


def final_team_return(out, **over) -> tuple[float, float]:
    keys = set(load_scenario("spread").make_config().__dataclass_fields__)
    cfg = {**SPREAD, "steps": "90000", "workers": "1", "envs_per_worker": "16", "backend": "inline",
           "progress": "false", "log_every": "0", "seed": "0", **over}
    tc, scen = resolve_overrides(cfg, ["low"], keys)
    Trainer(RunSpec("spread", scen, tc, ["low"], {}, out)).run()
    rows = [r["team_return"] for r in read_csv(out, "run") if np.isfinite(r.get("team_return", np.nan))]
    return rows[0], float(np.mean(rows[-5:]))


def test_the_default_critic_learns_simple_spread(tmp_path):
    first, trained = final_team_return(tmp_path / "default")
    _, frozen = final_team_return(tmp_path / "baseline", lr="1e-12")
    assert trained > frozen + 6.0, (first, trained, frozen)
    assert trained > first + 6.0, (first, trained, frozen)
