"""Broken on purpose: the leaves are named unit_0.. while the env's agents are agent_0.."""
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="leaves_mismatch",
    description="leaves that are not env agents",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups([f"unit_{i}" for i in range(len(agents))]),
    layers=lambda cfg: [Layer("low")],
)
