"""Predator-prey on MPE2 simple_tag: adversaries hunt as commander -> squads -> units.

The adversaries are the units of a three-layer team; the good agents (the prey) are opponents
driven by a scripted controller that runs away from the nearest adversary. The commander gives
each squad a prey to hunt, each squad gives each of its units a prey to chase; a unit's goal is
grounded as the vector from the unit to that prey.
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from mpe2 import simple_tag_v3

from hdppo import AgentGraph, Layer, Opponents, Scenario, ScenarioConfig


@dataclass
class TagConfig(ScenarioConfig):
    num_good: int = 2
    num_adversaries: int = 4
    num_obstacles: int = 2
    squad_size: int = 2
    max_cycles: int = 25
    catch_radius: float = 0.3


def make_env(cfg: TagConfig):
    return simple_tag_v3.parallel_env(num_good=cfg.num_good, num_adversaries=cfg.num_adversaries,
                                      num_obstacles=cfg.num_obstacles, max_cycles=cfg.max_cycles)


def make_graph(cfg: TagConfig, agents):
    hunters = [a for a in agents if a.startswith("adversary")]
    return AgentGraph.groups(hunters, [cfg.squad_size])


def _prey_offset(cfg: TagConfig) -> int:
    # adversary observation: own vel (2), own pos (2), obstacles (2 each), other agents (2 each), prey vel (2 each)
    return 4 + 2 * cfg.num_obstacles + 2 * (cfg.num_adversaries - 1)


def _prey_vectors(cfg: TagConfig, features: np.ndarray) -> np.ndarray:
    """[E, N, num_good, 2] vector from each adversary to each prey."""
    start = _prey_offset(cfg)
    rel = features[..., start:start + 2 * cfg.num_good]
    return rel.reshape(rel.shape[:-1] + (cfg.num_good, 2))


def make_layers(cfg: TagConfig):
    prey = gym.spaces.Discrete(cfg.num_good)

    def to_prey(goals, ctx):
        vec = _prey_vectors(cfg, ctx.features)
        return np.take_along_axis(vec, goals[..., None, None], axis=2)[:, :, 0, :]

    def distance(ctx):
        return np.linalg.norm(to_prey(ctx.goals, ctx), axis=-1)

    return [
        Layer("high", interval=8, goal_space=prey, choice="per_child"),
        Layer("mid", interval=4, goal_space=prey, choice="per_child",
              goal_features=to_prey, goal_features_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
              goal_success=lambda ctx: distance(ctx) < cfg.catch_radius),
        Layer("low", interval=1, intrinsic=lambda ctx: -distance(ctx), w_int=0.1),
    ]


def flee(cfg: TagConfig, env):
    """Each prey steps away from the nearest adversary (MPE discrete moves: 1 -x, 2 +x, 3 -y, 4 +y)."""
    start = 4 + 2 * cfg.num_obstacles

    def act(observations):
        out = {}
        for agent, ob in observations.items():
            rel = np.asarray(ob, dtype=np.float64)[start:start + 2 * cfg.num_adversaries].reshape(-1, 2)
            nearest = rel[np.argmin(np.linalg.norm(rel, axis=1))]
            axis = int(np.argmax(np.abs(nearest)))
            away = -np.sign(nearest[axis]) or 1.0
            out[agent] = (2 if away > 0 else 1) if axis == 0 else (4 if away > 0 else 3)
        return out

    return act


SCENARIO = Scenario(
    name="tag_pursuit",
    description="MPE2 simple_tag: squads of adversaries hunt scripted prey",
    env=make_env,
    graph=make_graph,
    layers=make_layers,
    config=TagConfig,
    opponents=Opponents(agents=lambda agents: [a for a in agents if a.startswith("agent")], controller=flee),
)
