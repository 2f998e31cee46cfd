"""world_comm: MPE2 simple_world_comm; the leader and its adversaries hunt as one team.

Heterogeneous units: `leadadversary_0` moves *and* speaks (Discrete(20)), the other adversaries
only move (Discrete(5)); the prey (`agent_*`, 28-d observations vs the hunters' 34-d) are
opponents. hdppo pads every action space to Discrete(20) with SuperSuit and masks actions 5..19
out for the plain adversaries. The leader and the adversaries share one `low` policy, so env()
pads the observations itself and appends a one-hot agent type (leader / adversary / prey) with
SuperSuit's agent_indicator, so that policy can tell who it is driving.

Three layers, grouped by unit type with AgentGraph.by_attribute: a commander over two squads
(`mid_lead`: the leader alone, `mid_hunt`: the other adversaries). The commander picks a prey per
squad, each squad a prey per unit. Prey hidden in a forest appear at (0, 0) in a plain adversary's
observation, but the leader sees everyone, so a unit's goal is grounded through the leader's eyes:
leader position + (prey - leader) - unit position.

    hdppo check examples/scenarios/world_comm.py
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Opponents, Scenario, ScenarioConfig


@dataclass
class WorldCommConfig(ScenarioConfig):
    num_good: int = 2
    num_adversaries: int = 4      # the leader counts as one
    num_obstacles: int = 1
    num_food: int = 2
    num_forests: int = 2
    max_cycles: int = 25
    catch: float = 0.15           # hunter-prey distance that counts as a catch (sizes 0.075 + 0.045)


def make_env(cfg: WorldCommConfig):
    import supersuit
    from mpe2 import simple_world_comm_v3
    env = simple_world_comm_v3.parallel_env(
        num_good=cfg.num_good, num_adversaries=cfg.num_adversaries, num_obstacles=cfg.num_obstacles,
        num_food=cfg.num_food, num_forests=cfg.num_forests, max_cycles=cfg.max_cycles)
    # pad to one shape first (agent_indicator needs it), then append the 3-way type one-hot at the end
    return supersuit.agent_indicator_v0(supersuit.pad_observations_v0(env), type_only=True)


def is_prey(agent: str) -> bool:
    return agent.startswith("agent_")


def make_graph(cfg: WorldCommConfig, agents: Sequence[str]) -> AgentGraph:
    hunters = [a for a in agents if not is_prey(a)]          # keeps the env's agent order
    return AgentGraph.by_attribute(hunters, lambda a: "lead" if a.startswith("lead") else "hunt")


def make_layers(cfg: WorldCommConfig) -> list[Layer]:
    # hunter obs: vel (2), pos (2), landmarks (2 each: obstacles, food, forests), other hunters (2 each),
    # prey (2 each), ...  -- the leader's unit index is 0 (first in the env's order).
    off = 4 + 2 * (cfg.num_obstacles + cfg.num_food + cfg.num_forests) + 2 * (cfg.num_adversaries - 1)
    prey: spaces.Discrete = spaces.Discrete(cfg.num_good)

    def to_prey(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        f = ctx.features                                             # [E, U, 37] the units' observations
        lead = f[:, :1]                                              # [E, 1, 37] the leader's
        rel = lead[..., off:off + 2 * cfg.num_good].reshape(f.shape[0], 1, cfg.num_good, 2)
        prey_pos = lead[..., None, 2:4] + rel                        # [E, 1, num_good, 2] world positions
        target = np.take_along_axis(np.broadcast_to(prey_pos, f.shape[:2] + prey_pos.shape[2:]),
                                    goals[..., None, None], axis=2)[:, :, 0]
        return (target - f[..., 2:4]).astype(np.float32)            # [E, U, 2] unit -> its prey

    def distance(ctx: LayerContext) -> np.ndarray:
        return np.linalg.norm(ctx.goal_features, axis=-1)

    return [
        Layer("high", interval=8, goal_space=prey),                  # per squad; one-hot goal by default
        Layer("mid", interval=4, goal_space=prey, goal_features=to_prey,
              goal_features_space=spaces.Box(-np.inf, np.inf, (2,), np.float32),
              goal_success=lambda ctx: distance(ctx) < cfg.catch),
        Layer("low", interval=1, intrinsic=lambda ctx: -distance(ctx), w_int=0.1),
    ]


def wander(cfg: WorldCommConfig, env):
    """Prey controller: random moves. The copy's action spaces are padded to Discrete(20), so draw
    from the real 5 moves (SuperSuit maps padded actions to 0, no-op, anyway). `observations` are
    the prey's padded 37-d ones; this controller ignores them."""
    rng = np.random.default_rng()
    return lambda observations: {a: int(rng.integers(5)) for a in observations}


SCENARIO = Scenario(
    name="world_comm",
    description="MPE2 simple_world_comm: leader + adversaries (padded, masked) hunt random prey",
    env=make_env, graph=make_graph, layers=make_layers, config=WorldCommConfig,
    opponents=Opponents(agents=lambda agents: [a for a in agents if is_prey(a)], controller=wander))
