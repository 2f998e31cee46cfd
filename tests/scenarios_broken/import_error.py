"""Broken on purpose: imports a module that does not exist (a typo of mpe2)."""
from mpe3 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="import_error",
    description="imports a missing module",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(agents),
    layers=lambda cfg: [Layer("low")],
)
