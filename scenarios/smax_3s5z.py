"""smax_3s5z: SMAX map 3s5z, 3 stalkers and 5 zealots against the same, versus JaxMARL's heuristic enemy.

The larger mixed team of 2s3z. 8 units, a flat team (`layers=3`: commander / squads / units);
see docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "3s5z", description="SMAX 3s5z: 3 stalkers + 5 zealots vs the same, against JaxMARL's heuristic enemy, 100 steps")
