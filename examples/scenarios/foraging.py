"""foraging: level-based foraging (lbforaging 2.0), a gymnasium multi-agent env, through hdppo's adapter.

The example of "A gymnasium multi-agent env (lbforaging)" in docs/writing-a-scenario.md. Players
on a grid load food whose level is at most the sum of the levels of the players loading it
together; lbforaging's reward splits each food among its loaders, so a team's episode return is
the fraction of the food (by level) it collected. `GymnasiumMultiAgent` turns the one gym env
(tuple spaces, list rewards, one `done`) into the PettingZoo env hdppo needs, and reads the env's
own 50-step limit, so an episode cut there is a truncation and one that ends with the field
cleared a termination.

- `layers=1` (default): flat, one shared policy for every player;
- `layers=2`: a commander tells each player which food to go for (goal k = the k-th food the
  player sees, in row-major order), grounded as the vector from the player to that food and a
  flag that the food is still there. A food that is eaten leaves the list, so the later foods move
  up one index: the commander's goal then points at another food (or at none, flag 0) until it
  decides again, every 5 steps (`interval.high=N` to change it).

Episode metrics (`hdppo eval`, `hdppo plot`, TensorBoard): `food_collected` (the fraction of food
levels loaded) and `cleared` (1 when every food was loaded). `shared_reward.low=true` gives every
player the team's total reward instead of its own share.

    pip install 'hdppo[gymnasium-ma]'
    hdppo check examples/scenarios/foraging.py
    hdppo check examples/scenarios/foraging.py layers=2 players=3 food=2 coop=true
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import GymnasiumMultiAgent

ENV_LIMIT = 50      # the registered lbforaging envs end every episode at 50 steps


@dataclass
class ForagingConfig(ScenarioConfig):
    size: int = 8              # the field is size x size (5..19)
    players: int = 2           # 2..9
    food: int = 1              # 1..4
    coop: bool = False         # every food needs all players' levels together
    sight: int = 0             # how far a player sees (0: the whole field)
    max_steps: int = 50        # at most ENV_LIMIT; fewer adds a gymnasium TimeLimit
    layers: int = 1            # 1 flat; 2 a commander assigning a food to each player (every 5 steps)


def env_id(cfg: ForagingConfig) -> str:
    """The registered id (full sight; a smaller `sight` is passed to the env as a keyword)."""
    return f"Foraging-{cfg.size}x{cfg.size}-{cfg.players}p-{cfg.food}f{'-coop' if cfg.coop else ''}-v3"


def cleared(env) -> bool:
    """The env ended on its own: no food left on the field."""
    return bool(env.unwrapped.field.sum() == 0)


def make_env(cfg: ForagingConfig) -> GymnasiumMultiAgent:
    import gymnasium as gym
    import lbforaging  # noqa: F401 - registers the Foraging-* ids

    if not 1 <= cfg.max_steps <= ENV_LIMIT:
        raise ScenarioError(f"max_steps={cfg.max_steps}", f"pass 1 <= max_steps <= {ENV_LIMIT} "
                            "(lbforaging's registered envs end at 50 steps)")
    kwargs = {} if cfg.sight == 0 else {"sight": cfg.sight}
    if cfg.max_steps < ENV_LIMIT:
        kwargs["max_episode_steps"] = cfg.max_steps          # gymnasium's TimeLimit: it flags truncated itself
    env = gym.make(env_id(cfg), disable_env_checker=True, **kwargs)
    return GymnasiumMultiAgent(env, [f"player_{i}" for i in range(cfg.players)], terminal=cleared,
                               name="foraging")


def episode_info(env: GymnasiumMultiAgent) -> dict[str, float]:
    """Called on the copy when its episode ends: the food it loaded (lbforaging keeps the total it spawned)."""
    inner: Any = env.env.unwrapped                         # lbforaging's ForagingEnv
    spawned = float(inner._food_spawned)
    left = float(inner.field.sum())
    return {"food_collected": 1.0 - left / spawned if spawned else 0.0, "cleared": float(left == 0)}


def make_graph(cfg: ForagingConfig, agents: Sequence[str]) -> AgentGraph:
    return AgentGraph.team(agents, cfg.layers, len(agents))


def make_layers(cfg: ForagingConfig) -> list[Layer]:
    if cfg.layers == 1:
        return [Layer("low")]
    if cfg.layers != 2:
        raise ScenarioError(f"layers={cfg.layers}", "use layers=1 (flat) or layers=2 (a commander over the players)")
    far = float(cfg.size - 1)

    def to_food(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        # player obs: foods (y, x, level) x food, then players (y, x, level), itself first;
        # an unseen or eaten food reads (-1, -1, 0)
        f = ctx.features
        k = goals[..., None]                                                    # [E, U, 1]
        food = np.concatenate([np.take_along_axis(f, 3 * k + j, axis=-1) for j in range(3)], axis=-1)
        me = f[..., 3 * cfg.food: 3 * cfg.food + 2]
        present = (food[..., 2:3] > 0).astype(np.float32)
        return np.concatenate([(food[..., :2] - me) * present, present], axis=-1)    # [E, U, 3]

    def adjacent(ctx: LayerContext) -> np.ndarray:
        g = ctx.goal_features
        return (g[..., 2] > 0) & (np.abs(g[..., :2]).sum(axis=-1) == 1)

    return [
        Layer("high", interval=5, goal_space=spaces.Discrete(cfg.food), choice="per_child",
              goal_features=to_food,
              goal_features_space=spaces.Box(np.array([-far, -far, 0], np.float32),
                                             np.array([far, far, 1], np.float32)),
              goal_success=adjacent),
        Layer("low", intrinsic=lambda ctx: -np.abs(ctx.goal_features[..., :2]).sum(axis=-1) / (2 * far), w_int=0.02),
    ]


SCENARIO = Scenario(
    name="foraging",
    description="lbforaging 2.0 through GymnasiumMultiAgent: flat, or a commander assigning foods (layers=2)",
    env=make_env, graph=make_graph, layers=make_layers, config=ForagingConfig, episode_info=episode_info)
