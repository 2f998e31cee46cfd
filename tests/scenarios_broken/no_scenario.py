"""Broken on purpose: builds a scenario but never binds it to SCENARIO."""
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

scenario = Scenario(
    name="no_scenario",
    description="the module-level name is lower case",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(agents),
    layers=lambda cfg: [Layer("low")],
)
