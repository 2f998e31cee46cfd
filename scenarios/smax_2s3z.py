"""smax_2s3z: SMAX map 2s3z, 2 stalkers and 3 zealots against the same, versus JaxMARL's heuristic enemy.

Stalkers: 160 hp, 13 damage, range 6, slow to reload; zealots: 150 hp, 8 damage, melee (range 2).
5 units, a flat team (`layers=3`: commander / squads / units); see docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "2s3z", description="SMAX 2s3z: 2 stalkers + 3 zealots vs the same, against JaxMARL's heuristic enemy, 100 steps")
