"""Two-layer team on MPE2 simple_reference: a commander broadcasts a landmark to both agents.

The units keep the env's own Discrete(50) move-and-say actions; the commander's goal is a landmark
index, one-hot in the units' observations (the default grounding), chosen once for the whole pair.
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
from mpe2 import simple_reference_v3

from hdppo import AgentGraph, Layer, Scenario, ScenarioConfig


@dataclass
class ReferenceConfig(ScenarioConfig):
    max_cycles: int = 25
    commander_interval: int = 5


def make_layers(cfg: ReferenceConfig):
    return [
        Layer("high", interval=cfg.commander_interval, goal_space=gym.spaces.Discrete(3), choice="broadcast"),
        Layer("low"),
    ]


SCENARIO = Scenario(
    name="reference_pair",
    description="MPE2 simple_reference under one commander",
    env=lambda cfg: simple_reference_v3.parallel_env(max_cycles=cfg.max_cycles),
    graph=lambda cfg, agents: AgentGraph.groups(agents, layers=("high", "low")),
    layers=make_layers,
    config=ReferenceConfig,
)
