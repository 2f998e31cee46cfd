"""smax_5m_vs_6m: SMAX map 5m_vs_6m, 5 marines against 6 marines, versus JaxMARL's heuristic enemy.

Outnumbered: the hard marine map of SMAC, and of SMAX. 5 units, a flat team (`layers=3`:
commander / squads / units); see docs/scenarios/smax.md.
"""
from hdppo.sims.smax import smax_scenario

SCENARIO = smax_scenario(
    "5m_vs_6m", description="SMAX 5m_vs_6m: 5 marines vs 6 (outnumbered), against JaxMARL's heuristic enemy, 100 steps")
