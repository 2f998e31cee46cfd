"""smax_3s5z: SMAX map 3s5z, 3 stalkers and 5 zealots against the same, versus JaxMARL's heuristic enemy.

The larger mixed team of 2s3z: 8 units a side.

JaxMARL's SMAX (StarCraft micro in JAX; `pip install 'hdppo[smax]'`) with the parameters of its
published baselines: 100 steps, enemy actions visible, walls kill, the enemy attacks the closest
unit. 8 units, flat by default; `layers=3` gives a commander over squads with learned goals.
See docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "3s5z", description="SMAX 3s5z: 3 stalkers + 5 zealots vs the same, against JaxMARL's heuristic enemy, 100 steps")
