"""kaz: PettingZoo butterfly Knights-Archers-Zombies (vector observations); units die.

Needs pygame (`pip install "pettingzoo[butterfly]"`). Archers and knights defend the bottom of the
screen against zombies; a unit touched by a zombie is removed from the env, and its nodes stay in
the graph as inactive (parents aggregate over the living only).

Three layers. By default squads are unit types (AgentGraph.by_attribute: `mid_archer`,
`mid_knight`); with grouping=spatial, squads of `squad_size` are regrouped by position at every
reset (positions read from the units' observations). The screen is cut into `lanes` vertical
lanes: the commander picks a lane per squad, each squad a lane per unit. A unit's goal is grounded
as the signed x-distance to its lane's centre. (The commander does not read the env's global
state: KAZ's state() slightly leaves its declared [-1, 1] bounds, which `hdppo check` flags.)

    hdppo check examples/scenarios/kaz.py
    hdppo check examples/scenarios/kaz.py grouping=spatial num_archers=4 num_knights=4
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig


@dataclass
class KazConfig(ScenarioConfig):
    num_archers: int = 2
    num_knights: int = 2
    max_zombies: int = 10
    max_cycles: int = 200          # the env's default, 900, makes long episodes
    lanes: int = 3
    grouping: Literal["type", "spatial"] = "type"
    squad_size: int = 2            # with grouping=spatial


def make_env(cfg: KazConfig):
    from pettingzoo.butterfly import knights_archers_zombies_v11
    return knights_archers_zombies_v11.parallel_env(
        num_archers=cfg.num_archers, num_knights=cfg.num_knights, max_zombies=cfg.max_zombies,
        max_cycles=cfg.max_cycles, obs_method="vector")


def make_graph(cfg: KazConfig, agents: Sequence[str]) -> AgentGraph:
    if cfg.grouping == "spatial":
        return AgentGraph.groups(agents, [cfg.squad_size], spatial=True)
    return AgentGraph.by_attribute(agents, lambda a: a.split("_")[0])    # 'archer' / 'knight'


# a unit's obs is a (rows, 5) array, flattened by hdppo; row 0 is [0, x, y, heading_x, heading_y]
X, Y = 1, 2


def positions(env) -> np.ndarray:
    """[E, U, 2] unit positions for spatial grouping, read from the batch's unit observations."""
    return env.obs[..., [X, Y]]


def make_layers(cfg: KazConfig) -> list[Layer]:
    centre = (np.arange(cfg.lanes, dtype=np.float32) + 0.5) / cfg.lanes
    lane: spaces.Discrete = spaces.Discrete(cfg.lanes)

    def to_lane(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        return (centre[goals] - ctx.features[..., X])[..., None]        # [E, U, 1]

    def in_lane(ctx: LayerContext) -> np.ndarray:
        return np.abs(ctx.goal_features[..., 0]) < 0.5 / cfg.lanes

    return [
        Layer("high", interval=16, goal_space=lane),
        Layer("mid", interval=4, goal_space=lane, goal_features=to_lane,
              goal_features_space=spaces.Box(-1.0, 1.0, (1,), np.float32), goal_success=in_lane),
        Layer("low", interval=1, intrinsic=lambda ctx: -np.abs(ctx.goal_features[..., 0]), w_int=0.05),
    ]


SCENARIO = Scenario(
    name="kaz",
    description="Butterfly Knights-Archers-Zombies: squads by type (or position) hold lanes; units die",
    env=make_env, graph=make_graph, layers=make_layers, config=KazConfig, positions=positions)
