"""Broken on purpose: the upper layer's goal space is a (low, high) tuple, not a Gymnasium space."""
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="bad_goal_space",
    description="goal_space=(0, 5)",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(agents, layers=("high", "low")),
    layers=lambda cfg: [Layer("high", interval=4, goal_space=(0, 5)), Layer("low")],
)
