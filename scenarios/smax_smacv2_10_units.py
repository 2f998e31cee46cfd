"""smax_smacv2_10_units: SMAX map smacv2_10_units, 10 against 10 in SMACv2's style, versus JaxMARL's heuristic enemy.

The large map: each episode draws the allies' 10 unit types uniformly from SMAX's six (marine,
marauder, stalker, zealot, zergling, hydralisk), the enemies get the same mix, and the sides start
either facing each other or with the enemies surrounding the allies (SMACv2's "surround and
reflect"), so a team cannot learn one fixed opening.
10 units, a flat team (`hier=true`: commander -> squads -> units assigning enemy targets;
`layers=3`: learned discrete goals); see docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "smacv2_10_units",
    description="SMAX smacv2_10_units: 10 vs 10, unit types and start positions drawn each episode (SMACv2), "
                "against JaxMARL's heuristic enemy, 100 steps")
