"""smax_5m_vs_6m: SMAX map 5m_vs_6m, 5 marines against 6 marines, versus JaxMARL's heuristic enemy.

Outnumbered: a win needs focus fire and pulling damaged marines
back (a hard map in SMAC and SMAX).

JaxMARL's SMAX (StarCraft micro in JAX; `pip install 'hdppo[smax]'`) with the parameters of its
published baselines: 100 steps, enemy actions visible, walls kill, the enemy attacks the closest
unit. 5 units, flat by default; `layers=3` gives a commander over squads with learned goals.
See docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "5m_vs_6m", description="SMAX 5m_vs_6m: 5 marines vs 6 (outnumbered), against JaxMARL's heuristic enemy, 100 steps")
