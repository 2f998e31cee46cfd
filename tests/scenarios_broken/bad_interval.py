"""Broken on purpose: the commander decides every 6 steps, its squads every 4 (6 % 4 != 0)."""
import gymnasium as gym
from mpe2 import simple_spread_v3

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario

SCENARIO = Scenario(
    name="bad_interval",
    description="upper interval not a multiple of the lower one",
    env=lambda cfg: simple_spread_v3.parallel_env(N=3, max_cycles=10),
    graph=lambda cfg, agents: AgentGraph.groups(agents, [1]),
    layers=lambda cfg: [
        Layer("high", interval=6, goal_space=gym.spaces.Discrete(3)),
        Layer("mid", interval=4, goal_space=gym.spaces.Discrete(3)),
        Layer("low"),
    ],
)
