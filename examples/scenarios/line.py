"""line: MPE2 simple_line with a commander that tells each agent where on the line to stand.

The worked example of docs/writing-a-scenario.md. Two layers: one `high` node over N `low` units.
Every 5 steps the commander picks, per unit, one of `slots` evenly spaced points on the segment
between the two landmarks; a unit sees that goal as the vector from itself to the point and earns
a small intrinsic reward for closing in on it, on top of the env's shared reward.

    hdppo check examples/scenarios/line.py
    hdppo check examples/scenarios/line.py n_agents=6 slots=6 interval.high=10
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig


@dataclass
class LineConfig(ScenarioConfig):
    n_agents: int = 4
    slots: int = 4            # points on the line the commander can pick from
    max_cycles: int = 25
    reached: float = 0.05     # a unit has reached its point within this distance


def make_env(cfg: LineConfig):
    from mpe2 import simple_line_v1
    return simple_line_v1.parallel_env(N=cfg.n_agents, max_cycles=cfg.max_cycles)


def make_graph(cfg: LineConfig, agents: Sequence[str]) -> AgentGraph:
    return AgentGraph.groups(agents, layers=("high", "low"))      # one commander over every agent


def make_layers(cfg: LineConfig) -> list[Layer]:
    frac = np.linspace(0.0, 1.0, cfg.slots, dtype=np.float32)        # slot j sits at lm0 + frac[j] * (lm1 - lm0)

    def to_point(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        # unit obs: vel (2), pos (2), landmark_0 - pos (2), landmark_1 - pos (2)
        lm0, lm1 = ctx.features[..., 4:6], ctx.features[..., 6:8]     # [E, U, 2] each
        f = frac[goals][..., None]                                     # goals [E, U] int
        return lm0 + f * (lm1 - lm0)                                   # [E, U, 2] unit -> its point

    def distance(ctx: LayerContext) -> np.ndarray:
        return np.linalg.norm(ctx.goal_features, axis=-1)             # [E, U]

    return [
        Layer("high", interval=5, goal_space=spaces.Discrete(cfg.slots), choice="per_child",
              goal_features=to_point, goal_features_space=spaces.Box(-np.inf, np.inf, (2,), np.float32),
              goal_success=lambda ctx: distance(ctx) < cfg.reached),
        Layer("low", interval=1, intrinsic=lambda ctx: -distance(ctx), w_int=0.1),
    ]


SCENARIO = Scenario(
    name="line",
    description="MPE2 simple_line: a commander assigns each agent a point on the line",
    env=make_env, graph=make_graph, layers=make_layers, config=LineConfig)
