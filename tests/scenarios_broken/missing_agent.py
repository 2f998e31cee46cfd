"""Broken on purpose: the graph leaves out the last env agent and the scenario has no opponents."""
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="missing_agent",
    description="agent_2 is in neither the graph nor an opponent team",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(list(agents)[:2]),
    layers=lambda cfg: [Layer("low")],
)
