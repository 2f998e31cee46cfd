"""Evidence on VMAS balance per the protocol (docs/evidence/README.md#the-protocol): 4 robots carry a
package to a goal (BenchMARL's task parameters, `scenarios/vmas_balance.py`), at hdppo's default
config. Arms at equal env frames: the flat team on the env reward; the flat team with the one
goal-free exploration bonus a VMAS task has in hdppo, the entropy bonus held at 3x the default's
start for the whole run (`ent_coef=0.03 ent_coef_final=0.03`; VMAS's own reward is already
shaped, and hdppo adds no shaping of its own to it); and the 3-layer team (a commander over 2
squads of 2 robots, learned discrete goals, every layer on the env reward alone, no skill stage).
5 seeds each, the outcome the eval's team return.

    python examples/evidence/balance.py --write docs/evidence        # docs/evidence/balance-protocol.md and .png

The issue's target: the 3-layer team ends above the better flat arm, the intervals apart (TAG,
Paolo et al. 2025, reports its 3-level PPO above MAPPO on this task). `--out DIR` holds the runs
(default runs/evidence/balance-protocol; finished runs are reused); `--steps`, `--seeds`,
`--episodes`, `--set KEY=VALUE`, `--tag`, `--report-only` as in examples.studies.protocol.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies import protocol
from examples.studies.protocol import ProtocolPlan

SCRIPT = "examples/evidence/balance.py"
PLAN = ProtocolPlan(
    scenario="vmas_balance", outcome="team_return", steps=300_000,
    flat=["layers=1"], flat_shaped=["layers=1", "ent_coef=0.03", "ent_coef_final=0.03"],
    hier=["layers=3", "squad_size=2"], seeds=[0, 1, 2, 3, 4], common=["workers=2"], eval_episodes=100,
    out=Path("runs/evidence/balance-protocol"), name="balance-protocol")


if __name__ == "__main__":
    protocol.main(PLAN, SCRIPT)
