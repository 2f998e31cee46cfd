"""Broken on purpose: the graph puts its top node in layer 'commander', the layers say 'high'."""
import gymnasium as gym
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario


def graph(cfg, agents):
    return AgentGraph.from_edges([("boss", a) for a in agents],
                                 {"boss": "commander", **{a: "low" for a in agents}})


SCENARIO = Scenario(
    name="unknown_layer",
    description="graph layer names differ from the Layer specs",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=graph,
    layers=lambda cfg: [Layer("high", interval=4, goal_space=gym.spaces.Discrete(3)), Layer("low")],
)
