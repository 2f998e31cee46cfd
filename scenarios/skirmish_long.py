"""skirmish_long: the skirmish on a 40 x 40 map with 5 control points, a strong opponent and the
reward only for the outcome (issue 22, part 3: a long, sparse skirmish).

The same rules, units, layers and hooks as `skirmish` (scenarios/skirmish/); only the defaults
differ (`SkirmishLongConfig`): `size=40 n_points=5 max_steps=600 difficulty=0.85 reward=outcome`.
Every key of `skirmish` works here and any of these can be set back, e.g.
`hdppo train skirmish_long reward=dense`. docs/scenarios/skirmish.md ("The long, sparse skirmish")
says why these values, and that they are chosen from fixed controllers, not tuned by training.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hdppo.scenarios.skirmish import SCENARIO as SKIRMISH
from hdppo.scenarios.skirmish import SkirmishConfig

__all__ = ["SCENARIO", "SkirmishLongConfig"]


@dataclass
class SkirmishLongConfig(SkirmishConfig):
    """SkirmishConfig with the long, sparse skirmish's defaults."""

    size: float = 40.0              # twice the side: the three enemy squads guard lanes 8 apart
    n_points: int = 5               # the opponent guards points 0-2; 3 and 4 are free
    max_steps: int = 600
    difficulty: float = 0.85        # lane against lane loses; the whole team on one enemy squad wins
    reward: str = "outcome"         # w_win on the winning step, nothing else


SCENARIO = dataclasses.replace(
    SKIRMISH, name="skirmish_long", config=SkirmishLongConfig,
    description="The skirmish on a 40x40 map, 5 points, difficulty 0.85, reward only for a win (sparse).")
