"""spread: MPE2 simple_spread with 6 agents and 6 landmarks; 2 squads of 3 under one commander.

The commander gives each squad a subset of landmarks (grounded as vectors from the squad's centroid
to those landmarks); a squad gives each unit one landmark (grounded as the vector from the unit to
it); units move and are rewarded for closing in on their landmark on top of the env's reward.
With attend=true a unit observes only its goal's landmark (Layer.attend; off by default).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import PettingZooBatch
from hdppo.team.scenario import Entities

from .sim import SpreadBatch

if TYPE_CHECKING:
    from hdppo import BatchedEnv
    from hdppo.sims import Scene

LANDMARK_OFFSET = 4      # unit obs: vel(2), pos(2), landmark - pos (2 per landmark), others, comm
REACHED = 0.1            # a landmark counts as covered within this distance (MPE landmark size x2)


@dataclass
class SpreadConfig(ScenarioConfig):
    n_agents: int = 6
    squad_size: int = 3
    layers: int = 3              # 3: commander/squads/units, 2: commander/units, 1: flat units
    max_cycles: int = 50
    local_ratio: float = 0.5
    native: bool = True          # numpy-batched port of simple_spread (same numbers); false: copies of mpe2
    attend: bool = False         # units observe only their goal's landmark (the other landmarks read 0)


def make_env(cfg: SpreadConfig, render_mode: str | None = None) -> Any:
    """MPE2's simple_spread; render_mode="rgb_array" uses MPE2's own renderer (`hdppo render` draws the
    team's squads and goals over its own view instead)."""
    from mpe2 import simple_spread_v3
    return simple_spread_v3.parallel_env(N=cfg.n_agents, local_ratio=cfg.local_ratio, max_cycles=cfg.max_cycles,
                                         continuous_actions=False, render_mode=render_mode)


def make_graph(cfg: SpreadConfig, agents: Sequence[str]) -> AgentGraph:
    return AgentGraph.team(agents, cfg.layers, cfg.squad_size)


def _landmark_vectors(features: np.ndarray, n: int) -> np.ndarray:
    """[..., D] unit (or mean-of-units) features -> [..., n, 2] vectors to each landmark."""
    return features[..., LANDMARK_OFFSET:LANDMARK_OFFSET + 2 * n].reshape(features.shape[:-1] + (n, 2))


def make_layers(cfg: SpreadConfig) -> list[Layer]:
    n = cfg.n_agents
    subsets = np.array(list(itertools.combinations(range(n), cfg.squad_size)), dtype=np.int64)

    def unit_goal(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None                 # every hook but `observe` sees the features
        vec = _landmark_vectors(ctx.features, n)                          # [E, U, n, 2]
        return np.take_along_axis(vec, goals[..., None, None], axis=2)[:, :, 0]

    def unit_reached(ctx: LayerContext) -> np.ndarray:
        g = ctx.goal_features
        return np.hypot(g[..., 0], g[..., 1]) < REACHED

    def unit_intrinsic(ctx: LayerContext) -> np.ndarray:
        g = ctx.goal_features
        return -np.hypot(g[..., 0], g[..., 1])

    def goal_landmark(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        return np.arange(n) == goals[..., None]                           # [E, U, n]

    if cfg.layers == 1:        # flat: no goals, so no goal-reaching reward
        if cfg.attend:
            raise ScenarioError("attend=true needs goals, but layers=1 is a flat team without them",
                                "use layers=2 or layers=3 with attend=true", where="scenario 'spread'")
        return [Layer("low", interval=1)]
    # the goal term leads: with w_int 0.1 / w_ext 1 the shared team reward drowned it and the units
    # did not learn in 150k steps (team return -514 -> -545); with 1.0 / 0.1 it went -514 -> -430
    low = Layer("low", interval=1, intrinsic=unit_intrinsic, w_int=1.0, w_ext=0.1,
                attend=goal_landmark if cfg.attend else None,
                entities=Entities(LANDMARK_OFFSET, 2, n) if cfg.attend else None)

    def over_units(name: str) -> Layer:
        """The layer above the units: a landmark per unit."""
        return Layer(name, interval=5, goal_space=spaces.Discrete(n), goal_features=unit_goal,
                     goal_features_space=spaces.Box(-np.inf, np.inf, (2,), np.float32), goal_success=unit_reached)
    if cfg.layers == 2:
        return [over_units("high"), low]

    def squad_goal(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None
        centroid_vec = _landmark_vectors(ctx.features, n)                 # mean part comes first
        chosen = subsets[goals]                                           # [E, S, k]
        vec = np.take_along_axis(centroid_vec, chosen[..., None], axis=2)  # [E, S, k, 2]
        return vec.reshape(vec.shape[0], vec.shape[1], -1)

    def squad_covered(ctx: LayerContext) -> np.ndarray:
        vec = _landmark_vectors(ctx.child_features, n)                    # [E, S, C, n, 2]
        dist = np.hypot(vec[..., 0], vec[..., 1])
        dist = np.where(ctx.child_alive[..., None], dist, np.inf).min(axis=2)   # [E, S, n]
        chosen = subsets[ctx.goals]
        return np.asarray((np.take_along_axis(dist, chosen, axis=2) < REACHED).all(axis=2))

    high = Layer("high", interval=10, goal_space=spaces.Discrete(len(subsets)), goal_features=squad_goal,
                 goal_features_space=spaces.Box(-np.inf, np.inf, (2 * cfg.squad_size,), np.float32),
                 goal_success=squad_covered)
    mid = over_units("mid")
    return [high, mid, low]


def scene(env: Any) -> Scene:
    """Agents and landmarks of MPE2's world (its env also renders itself with render_mode="rgb_array")."""
    from hdppo.sims import Scene
    world = env.unwrapped.world
    units = np.array([a.state.p_pos for a in world.agents], float)
    alive = np.array([a.name in env.agents for a in world.agents], bool)
    return Scene((-1.5, 1.5, -1.5, 1.5), units, alive,
                 landmarks=np.array([lm.state.p_pos for lm in world.landmarks], float))


def goal_xy(env: Any, cfg: SpreadConfig, layer: str, goals: np.ndarray) -> np.ndarray:
    """Units' goals are landmarks; a squad's goal is a subset of squad_size landmarks: their centre."""
    marks = np.array([lm.state.p_pos for lm in env.unwrapped.world.landmarks], float)
    g = np.asarray(goals, np.int64)
    if layer == "low":
        return marks[np.clip(g, 0, len(marks) - 1)]
    subsets = np.array(list(itertools.combinations(range(len(marks)), cfg.squad_size)), dtype=np.int64)
    return marks[subsets[np.clip(g, 0, len(subsets) - 1)]].mean(axis=1)


def make_batched(cfg: SpreadConfig, n_envs: int, seed: int | None) -> BatchedEnv:
    if cfg.native:
        return SpreadBatch(cfg.n_agents, cfg.local_ratio, cfg.max_cycles, n_envs, seed)
    return PettingZooBatch(lambda: make_env(cfg), [f"agent_{i}" for i in range(cfg.n_agents)], n_envs)


SCENARIO = Scenario(
    name="spread",
    description="MPE2 simple_spread, 6 agents / 6 landmarks: commander -> 2 squads of 3 -> units",
    env=make_env, graph=make_graph, layers=make_layers, config=SpreadConfig, batched_env=make_batched,
    positions=lambda env: env.obs[..., 2:4], scene=scene, goal_xy=goal_xy)
