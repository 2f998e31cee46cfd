"""Broken on purpose: a missing closing bracket."""
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="syntax_error",
    description="a syntax error",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(agents),
    layers=lambda cfg: [Layer("low")],
