"""warehouse: teams of robots fetch ordered items from shelves to stations; numpy over all copies.

Robots move on a grid warehouse (layout in scenarios/warehouse/sim.py: shelf rows with aisles,
stations on the bottom wall, 4 zones = quadrants of the shelf area). Actions Discrete(5): 0 stay,
1 up (y-1), 2 down (y+1), 3 left (x-1), 4 right (x+1); walls and shelves cancel a move. Picking
and delivering are automatic: an empty robot next to (4-adjacent) a shelf with an open order picks
it, a carrying robot on a station delivers it (+1 to that robot; +pick_reward on a pick).

No overlap: a move is cancelled if its cell is taken after the moves by a robot that stays (or is
cancelled), if a lower-index robot moves into the same cell, or if two robots would swap cells;
cancellations repeat until none is left (chains of moves into vacated cells go through).

Orders: with probability order_rate per step a copy gets one order, on a uniform random shelf
with no open order whose zone has a free slot (each zone holds `slots` open orders; an arrival with
every zone full is refused and counted as `rejected`). Open orders wait until picked.

Layers (`layers` 3): high (dispatcher) gives each team a zone, mid (team) gives each robot a zone,
low (robots) move. A robot's zone goal is grounded as its current task: the station if it carries
an item, else the nearest open order of that zone that no other idle robot with the same zone is
closer to (else the nearest one), else the zone's home cell; as [vector (2), path distance (1),
first move of a shortest path (2), has task (1)]. A team's zone goal is grounded as [zone home -
team centroid (2), zone's open orders / slots (1)]. `layers` 2: high gives each robot a zone;
`layers` 1: flat robots.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import BatchParallelEnv

from .sim import GOAL_DIM, N_ZONES, OFF_LOCAL, OFF_ZONES, WarehouseBatch, build_layout

if TYPE_CHECKING:
    from hdppo.sims import Scene

ROBOT_GOAL_BOX = gym.spaces.Box(np.array([-1, -1, 0, -1, -1, 0], np.float32), np.ones(GOAL_DIM, np.float32),
                                dtype=np.float32)
TEAM_GOAL_BOX = gym.spaces.Box(np.array([-1, -1, 0], np.float32), np.ones(3, np.float32), dtype=np.float32)


@dataclass
class WarehouseConfig(ScenarioConfig):
    """Warehouse config; `layers` is the hierarchy depth (1 flat, 2 dispatcher/robots, 3 dispatcher/teams/robots)."""

    width: int = 12
    height: int = 10
    n_stations: int = 2
    n_teams: int = 2
    team_size: int = 4
    layers: int = 3
    slots: int = 4              # open orders a zone holds (queue capacity 4 * slots)
    order_rate: float = 0.6     # probability of an order arrival per step and copy
    max_steps: int = 200
    pick_reward: float = 0.5    # env reward for a pick (a delivery gives 1)
    step_penalty: float = 0.0
    off_goal_pick: float = 0.0  # a robot's goal reward for a pick outside its goal zone (-1: only orders pay)


def check_config(cfg: WarehouseConfig) -> None:
    """Raise ScenarioError for a config the warehouse cannot build."""
    def bad(problem: str, fix: str) -> None:
        raise ScenarioError(problem, fix, where="scenario 'warehouse'")
    if cfg.width < 6 or cfg.height < 6:
        bad(f"a {cfg.width}x{cfg.height} warehouse is too small for shelf rows and aisles", "use width, height >= 6")
    if not 1 <= cfg.n_stations <= cfg.width:
        bad(f"n_stations={cfg.n_stations} does not fit the bottom wall", f"use 1 <= n_stations <= width ({cfg.width})")
    if min(cfg.n_teams, cfg.team_size, cfg.slots, cfg.max_steps) < 1:
        bad("n_teams, team_size, slots and max_steps must be >= 1", "fix those values")
    if cfg.layers not in (1, 2, 3):
        bad(f"layers={cfg.layers} is not a supported depth", "use layers=1, 2 or 3")
    if not 0.0 <= cfg.order_rate <= 1.0:
        bad(f"order_rate={cfg.order_rate} is not a probability", "use 0 <= order_rate <= 1")
    layout = build_layout(cfg.width, cfg.height, cfg.n_stations)
    room = int((~layout.blocked & ~layout.is_station).sum())
    if cfg.n_teams * cfg.team_size > room:
        bad(f"{cfg.n_teams * cfg.team_size} robots do not fit the {room} free cells of a "
            f"{cfg.width}x{cfg.height} warehouse", "raise width / height or lower n_teams / team_size")


def make_batch(cfg: WarehouseConfig, n_envs: int = 1, seed: int | None = None) -> WarehouseBatch:
    check_config(cfg)
    return WarehouseBatch(cfg, n_envs, seed)


class WarehouseParallelEnv(BatchParallelEnv):
    """One warehouse copy behind PettingZoo's parallel dict API (WarehouseBatch with E=1)."""

    metadata = {"name": "warehouse_v0", "render_modes": ["rgb_array"]}
    batch: WarehouseBatch

    def __init__(self, cfg: WarehouseConfig | None = None, render_mode: str | None = None) -> None:
        self.cfg = cfg if cfg is not None else WarehouseConfig()
        super().__init__(make_batch(self.cfg, 1, None), render_mode=render_mode, scene=scene)


ZONE_COLOURS = ["#ff7f0e", "#ffbb78", "#f7b6d2", "#c49c94"]


def scene(env: WarehouseParallelEnv) -> Scene:
    """Robots, shelves (walls), stations (black) and zone homes (coloured) of the env's copy."""
    from hdppo.sims import Scene
    b, L = env.batch, env.batch.layout
    xy = lambda cells: np.stack(L.xy(np.asarray(cells)), axis=-1).astype(float)      # noqa: E731
    marks = np.concatenate([xy(L.stations), xy(L.zone_home)])
    colours = ["#000000"] * len(L.stations) + ZONE_COLOURS[:len(L.zone_home)]
    return Scene((-0.5, L.width - 0.5, -0.5, L.height - 0.5), xy(b.cell[0]), b.alive[0].copy(),
                 landmarks=marks, landmark_colours=colours, walls=xy(L.shelves))


def goal_xy(env: WarehouseParallelEnv, cfg: Any, layer: str, goals: np.ndarray) -> np.ndarray:
    """A goal is a zone: its home cell."""
    L = env.batch.layout
    g = np.clip(np.asarray(goals, np.int64), 0, N_ZONES - 1)
    return np.stack(L.xy(L.zone_home[g]), axis=-1).astype(float)


# ---- layers: goal grounding, success, intrinsic reward, scripted low -----------------------------
def _sim(env: Any) -> Any:
    """The WarehouseBatch behind a hook's ctx.env (the hooks read the simulator's state)."""
    if not (hasattr(env, "goal_features") and hasattr(env, "last_pick")):
        raise ScenarioError(f"the warehouse's goal hooks read the simulator's state, but ctx.env is a "
                            f"{type(env).__name__}", "step the warehouse through its batched env "
                            "(Scenario.batched_env, the default); with hdppo.load, pass sim=env.batch to team.act",
                            where="scenario 'warehouse'")
    return env


def robot_goal_features(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
    """A robot's zone goal grounded as its current task (see the module docstring), [E, U, 6]."""
    return _sim(ctx.env).goal_features(np.asarray(goals, np.int64))


def team_goal_features(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
    """A team's zone goal: the zone block of the mean of its robots' observations, [E, T, 3]."""
    off = OFF_ZONES + 3 * np.clip(np.asarray(goals, np.int64), 0, N_ZONES - 1)
    idx = off[..., None] + np.arange(3)
    assert ctx.features is not None                     # every hook but `observe` sees the features
    return np.take_along_axis(ctx.features, idx, axis=2).astype(np.float32)


def robot_goal_success(ctx: LayerContext) -> np.ndarray:
    """A robot reached its goal when it picked an order in its goal zone."""
    return _sim(ctx.env).last_pick == ctx.goals


def team_goal_success(team_size: int) -> Callable[[LayerContext], np.ndarray]:
    """A team reached its goal when one of its robots picked an order in the team's zone."""
    def success(ctx: LayerContext) -> np.ndarray:
        pick = _sim(ctx.env).last_pick
        E, T = ctx.goals.shape
        return (pick.reshape(E, T, team_size) == ctx.goals[:, :, None]).any(axis=2)
    return success


def low_intrinsic(ctx: LayerContext) -> np.ndarray:
    """+1 for a pick in the goal zone or a delivery, else -0.1 x path distance to the task (0 without a task)."""
    env, gf = _sim(ctx.env), ctx.goal_features
    r = -0.1 * gf[..., 2] * gf[..., 5]
    return np.where((env.last_pick == ctx.goals) | env.last_deliver, 1.0, r)


def unit_reward(off_goal_pick: float) -> Callable[[LayerContext], np.ndarray]:
    """The robots' goal reward: `low_intrinsic`, and `off_goal_pick` for a pick outside the goal zone.

    Under `low_intrinsic` alone every delivery pays +1 whatever zone its item came from, so robots
    that deliver the nearest items earn as much as robots that obey: a skill library learns to
    ignore its orders. `off_goal_pick=-1` takes that delivery's +1 back at the pick, so only the
    orders pay (an item of the goal zone: +1 at the pick, +1 at the delivery; another: -1, +1)."""
    if off_goal_pick == 0.0:
        return low_intrinsic

    def reward(ctx: LayerContext) -> np.ndarray:
        pick = _sim(ctx.env).last_pick
        return np.where((pick >= 0) & (pick != ctx.goals), off_goal_pick, low_intrinsic(ctx))
    return reward


_LOCAL_OF_ACTION = np.array([0, 1, 6, 3, 4])      # ring index of the neighbour each move enters
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def greedy_low(decision: Any) -> np.ndarray:
    """Scripted robots: take the grounded first move; when a robot stands in that cell, wait, or on
    a pseudo-random half of such steps take a random free move (breaks head-on deadlocks)."""
    obs = np.asarray(decision.obs)
    E, S = obs.shape[:2]
    mx, my = obs[..., -3], obs[..., -2]
    act = np.where(my > 0, 2, np.where(my < 0, 1, 0))
    act = np.where(mx > 0, 4, np.where(mx < 0, 3, act))
    wall = obs[..., OFF_LOCAL:OFF_LOCAL + 8] > 0.5
    robot = obs[..., OFF_LOCAL + 8:OFF_LOCAL + 16] > 0.5
    stuck = (act > 0) & np.take_along_axis(robot, _LOCAL_OF_ACTION[act][..., None], axis=2)[..., 0]
    t = np.zeros(E, np.int64) if decision.t is None else np.asarray(decision.t, np.int64)
    with np.errstate(over="ignore"):
        h = (t[:, None].astype(np.uint64) * _MIX[0] + np.arange(1, S + 1, dtype=np.uint64) * _MIX[1]
             + np.arange(1, E + 1, dtype=np.uint64)[:, None] * _MIX[2])
    h = ((h ^ (h >> np.uint64(31))) >> np.uint64(33)).astype(np.int64)
    free = ~(wall | robot)[..., _LOCAL_OF_ACTION[1:]]                      # [E, S, 4] up, down, left, right
    n = free.sum(axis=2)
    k = (h // 2) % np.maximum(n, 1)
    pick = (free.cumsum(axis=2) > k[..., None]).argmax(axis=2) + 1
    detour = np.where((h % 2 == 0) & (n > 0), pick, 0)
    return np.where(stuck, detour, act).astype(np.int64)


def layers(cfg: WarehouseConfig) -> list[Layer]:
    """high (zone per team) / mid (zone per robot) / low (robots), cut to cfg.layers from the top."""
    check_config(cfg)
    if cfg.layers == 1:
        return [Layer("low", interval=1)]
    low = Layer("low", interval=1, intrinsic=unit_reward(cfg.off_goal_pick), w_int=0.1, scripted=greedy_low)

    def over_robots(name: str) -> Layer:
        """The layer above the robots: a zone per robot."""
        return Layer(name, interval=4, goal_space=gym.spaces.Discrete(N_ZONES), choice="per_child",
                     goal_features=robot_goal_features, goal_features_space=ROBOT_GOAL_BOX,
                     goal_success=robot_goal_success)
    if cfg.layers == 2:
        return [over_robots("high"), low]
    high = Layer("high", interval=8, goal_space=gym.spaces.Discrete(N_ZONES), choice="per_child",
                 goal_features=team_goal_features, goal_features_space=TEAM_GOAL_BOX,
                 goal_success=team_goal_success(cfg.team_size))
    return [high, over_robots("mid"), low]


def graph(cfg: WarehouseConfig, agents: Sequence[str]) -> AgentGraph:
    """Flat robots, a dispatcher over robots, or a dispatcher / teams of team_size / robots."""
    return AgentGraph.team(list(agents), cfg.layers, cfg.team_size)


SCENARIO = Scenario(
    name="warehouse",
    description="Numpy warehouse: a dispatcher and teams of robots pick orders at shelves and deliver them.",
    env=lambda cfg: WarehouseParallelEnv(cfg),
    graph=graph,
    layers=layers,
    config=WarehouseConfig,
    batched_env=make_batch,
    positions=lambda env: env.positions(),
    scene=scene,
    goal_xy=goal_xy,
)
