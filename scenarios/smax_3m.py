"""smax_3m: SMAX map 3m, 3 marines against 3 marines, versus JaxMARL's heuristic enemy.

Marines: 45 hp, 9 damage, range 5. Equal sides: the heuristic
enemy is beaten by focusing fire on one target at a time.

JaxMARL's SMAX (StarCraft micro in JAX; `pip install 'hdppo[smax]'`) with the parameters of its
published baselines: 100 steps, enemy actions visible, walls kill, the enemy attacks the closest
unit. 3 units, flat by default; `layers=3` gives a commander over squads with learned goals.
See docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "3m", description="SMAX 3m: 3 marines vs 3, against JaxMARL's heuristic enemy, 100 steps")
