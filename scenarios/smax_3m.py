"""smax_3m: SMAX map 3m, 3 marines against 3 marines, versus JaxMARL's heuristic enemy.

Marines: 45 hp, 9 damage, range 5. Equal sides. 3 units, a flat team (`layers=3`: commander /
squads / units); see docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "3m", description="SMAX 3m: 3 marines vs 3, against JaxMARL's heuristic enemy, 100 steps")
