"""adversary: MPE2 simple_adversary; two good agents under a commander fool a scripted adversary.

Two layers. Every 5 steps the commander gives each good agent a *continuous* goal: a Box(2) offset
in [-spread, spread]^2 from the goal landmark, the spot that agent should hold (one agent on the
goal, one on a decoy is the classic solution). The unit sees that goal as the vector from itself
to the spot. The commander also reads the env's global state (use_state=True).

The adversary (8-d observations, padded to the good agents' 10-d by hdppo) is an opponent: a
script that heads for the landmark nearest to the good agents' centroid. With continuous=true the
units act with Box(5) forces instead of Discrete(5) moves.

    hdppo check examples/scenarios/adversary.py
    hdppo check examples/scenarios/adversary.py continuous=true
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Opponents, Scenario, ScenarioConfig


@dataclass
class AdversaryConfig(ScenarioConfig):
    n_landmarks: int = 2          # env N: landmarks and good agents
    max_cycles: int = 25
    continuous: bool = False
    spread: float = 0.5           # the commander's offsets lie in [-spread, spread]^2


def make_env(cfg: AdversaryConfig):
    from mpe2 import simple_adversary_v3
    return simple_adversary_v3.parallel_env(N=cfg.n_landmarks, max_cycles=cfg.max_cycles,
                                            continuous_actions=cfg.continuous)


def make_graph(cfg: AdversaryConfig, agents: Sequence[str]) -> AgentGraph:
    return AgentGraph.groups([a for a in agents if a.startswith("agent_")], layers=("high", "low"))


def make_layers(cfg: AdversaryConfig) -> list[Layer]:
    def to_spot(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        # good-agent obs starts with goal_landmark - pos (2); goals are [E, U, 2] float offsets
        return ctx.features[..., 0:2] + goals                          # [E, U, 2] unit -> its spot

    def distance(ctx: LayerContext) -> np.ndarray:
        return np.linalg.norm(ctx.goal_features, axis=-1)

    offset = spaces.Box(-cfg.spread, cfg.spread, (2,), np.float32)
    return [
        Layer("high", interval=5, goal_space=offset, choice="per_child", use_state=True,
              goal_features=to_spot, goal_features_space=spaces.Box(-np.inf, np.inf, (2,), np.float32),
              goal_success=lambda ctx: distance(ctx) < 0.1),
        Layer("low", interval=1, intrinsic=lambda ctx: -distance(ctx), w_int=0.1),
    ]


def guard(cfg: AdversaryConfig, env):
    """Adversary script. Its obs (padded with zeros to 10): landmarks - pos (2 each), good agents - pos
    (2 each). MPE moves: 1 -x, 2 +x, 3 -y, 4 +y; continuous actions are Box(0, 1, (5,)) in that order."""
    n = cfg.n_landmarks

    def act(observations: dict) -> dict:
        out = {}
        for agent, ob in observations.items():
            lm = ob[:2 * n].reshape(n, 2)
            centroid = ob[2 * n:4 * n].reshape(n, 2).mean(axis=0)
            to = lm[np.argmin(np.linalg.norm(lm - centroid, axis=1))]   # landmark nearest the good agents
            axis = int(np.argmax(np.abs(to)))
            move = 1 + 2 * axis + int(to[axis] > 0)
            if cfg.continuous:
                out[agent] = np.eye(5, dtype=np.float32)[move]
            else:
                out[agent] = move
        return out

    return act


SCENARIO = Scenario(
    name="adversary",
    description="MPE2 simple_adversary: a commander sets Box goals for two agents vs a scripted adversary",
    env=make_env, graph=make_graph, layers=make_layers, config=AdversaryConfig,
    opponents=Opponents(agents=lambda agents: [a for a in agents if a.startswith("adversary")], controller=guard))
