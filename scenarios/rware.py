"""rware: the multi-robot warehouse (RWARE 2.0, EPyMARL's benchmark) through GymnasiumMultiAgent.

Robots in a warehouse of shelf blocks and highways fetch the requested shelves (the request queue),
carry them to the delivery cells at the bottom wall and return them to a free shelf cell. A robot
has a position and a facing; actions Discrete(5): 0 no-op, 1 forward, 2 turn left, 3 turn right,
4 load / unload (lift the shelf it stands under, or set its shelf down on a non-highway cell). An
empty robot drives under shelves, a loaded one only along highways and free cells. +1 to the robot
that brings a requested shelf onto a delivery cell (rware's individual reward); that shelf leaves
the queue and a random other one is requested. Episodes are 500 steps (a truncation).

Keys: `size` (`tiny-2ag`, `tiny-4ag`, `small-4ag`, or any `{tiny,small,medium,large}-Nag` rware
registers), `hard` (request queue = half the robots instead of one per robot: rware's `-hard`),
`layers`:

- `layers=1` (default): flat, one shared policy for every robot, env reward;
- `layers=2`: a dispatcher assigns each robot one requested shelf (goal k = queue entry k, every
  `interval.high` = 10 steps). The goal is grounded from the env's state as the robot's current
  leg: to that shelf (not carrying), to the nearest delivery cell (carrying a requested shelf), or
  to the nearest free shelf cell (carrying one already delivered), as the vector in the robot's
  frame (ahead, right) / (width + height) and the leg one-hot. Success: the robot picked that shelf
  up or delivered one. The robots' intrinsic reward (w_int 0.05): +1 per cell of progress along
  their leg, +1 for a delivery and for the first pick of a requested shelf since it was requested
  (setting a shelf down and lifting it again earns nothing). The dispatcher observes every
  robot (x, y, carrying a requested shelf, carrying another) and every requested shelf (x, y,
  carried), coordinates / grid size.

The flat team's goal-free shaping (`layers=1`, weighted by `w_int.low`, 0 by default so the flat
team learns from the env reward alone): the robots' shaping with the dispatcher's goal replaced by
the nearest requested shelf no robot carries: +1 per cell of progress along the leg, +1 for the
first pick of a requested shelf since it was requested (a shelf set down and lifted again earns no
second one), +1 for a delivery. `layers=1 w_int.low=0.05` gives it the robots' weight.

Episode metric (`hdppo eval`, `hdppo plot`): `deliveries` (requested shelves delivered). See
docs/scenarios/rware.md.

    pip install 'hdppo[rware]'
    hdppo check rware size=tiny-4ag hard=true layers=2
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import GymnasiumMultiAgent

SIZE = re.compile(r"(tiny|small|medium|large)-([1-9]|1[0-9])ag")
FORWARD = np.array([(0, -1), (0, 1), (-1, 0), (1, 0)])   # (dx, dy) facing rware's Direction UP, DOWN, LEFT, RIGHT
FETCH, DELIVER, RETURN = range(3)                        # a robot's leg
GOAL_BOX = spaces.Box(np.array([-1, -1, 0, 0, 0], np.float32), np.ones(5, np.float32), dtype=np.float32)


@dataclass
class RwareConfig(ScenarioConfig):
    size: str = "tiny-2ag"      # tiny-2ag, tiny-4ag, small-4ag (any {tiny,small,medium,large}-Nag, N < 20)
    hard: bool = False          # request queue = robots // 2 (rware's -hard), else one per robot
    layers: int = 1             # 1 flat; 2 a dispatcher assigning requested shelves to robots


def env_id(cfg: RwareConfig) -> str:
    """The registered rware id of the config, e.g. rware-tiny-4ag-hard-v2."""
    if not SIZE.fullmatch(cfg.size):
        raise ScenarioError(f"size={cfg.size!r}", "use tiny-2ag, tiny-4ag or small-4ag (or another "
                            "{tiny,small,medium,large}-Nag with 1 <= N <= 19)", where="scenario 'rware'")
    return f"rware-{cfg.size}{'-hard' if cfg.hard else ''}-v2"


@dataclass
class Snapshot:
    """The robots' state before an env step, for the flat shaping: positions [U, 2] (x, y), the shelf
    each carries (None if none) and the ids of the requested shelves."""

    pos: np.ndarray
    carrying: list[Any]
    queued: set[int]


class RwareEnv(GymnasiumMultiAgent):
    """One rware env as a PettingZoo ParallelEnv that also counts the episode's deliveries and keeps
    the robots' state before the last step (`before`) for the flat shaping."""

    deliveries = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before: Snapshot | None = None
        self.picked: set[int] = set()      # requested shelves whose pick the flat shaping has rewarded

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.deliveries = 0.0
        self.before, self.picked = None, set()
        return super().reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        w: Any = self.env.unwrapped          # rware.Warehouse
        self.before = Snapshot(np.array([(a.x, a.y) for a in w.agents]), [a.carrying_shelf for a in w.agents],
                               {id(s) for s in w.request_queue})
        out = super().step(actions)
        self.deliveries += sum(out[1].values())        # individual reward: +1 per delivery
        return out


def make_env(cfg: RwareConfig) -> RwareEnv:
    import gymnasium as gym
    import rware  # noqa: F401 - registers the rware-* ids

    name = env_id(cfg)
    env = gym.make(name, disable_env_checker=True)
    return RwareEnv(env, [f"robot_{i}" for i in range(queue_size(cfg)[0])], name="rware")


def episode_info(env: RwareEnv) -> dict[str, float]:
    return {"deliveries": float(env.deliveries)}


# ---- the dispatcher: state read from the warehouses behind ctx.env --------------------------------
def warehouses(env: Any) -> list[Any]:
    """The rware Warehouse of each copy behind a hook's ctx.env (hdppo's PettingZoo adapter)."""
    raw = getattr(env, "raw_envs", None)
    if raw is None:
        raise ScenarioError(f"rware's goal hooks read the warehouse's state, but ctx.env is a {type(env).__name__}",
                            "with hdppo.load, pass sim=SimpleNamespace(raw_envs=[env]) (env: the scenario's env)",
                            where="scenario 'rware'")
    return [e.env.unwrapped for e in raw]


def _nearest(cells: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each point of `at` [U, 2], the nearest (Manhattan) of `cells` [C, 2]."""
    return cells[np.abs(at[:, None, :] - cells[None, :, :]).sum(-1).argmin(axis=1)]


def legs(w: Any, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each robot's leg [U], position [U, 2] and target cell [U, 2] (x, y) under goals [U]."""
    pos = np.array([(a.x, a.y) for a in w.agents])
    queued = {id(s) for s in w.request_queue}
    leg = np.array([FETCH if a.carrying_shelf is None else DELIVER if id(a.carrying_shelf) in queued else RETURN
                    for a in w.agents])
    shelves = np.array([(s.x, s.y) for s in w.request_queue])
    target = shelves[np.clip(goals, 0, len(shelves) - 1)]
    if (leg == DELIVER).any():
        target[leg == DELIVER] = _nearest(np.array(w.goals), pos[leg == DELIVER])
    if (leg == RETURN).any():
        free = (w.highways == 0) & (w.grid[1] == 0)      # shelf cells without a shelf (grid[1]: shelf ids)
        for x, y in pos[leg == RETURN]:
            free[y, x] |= not w.highways[y, x]           # a robot's own cell, under the shelf it carries
        ys, xs = np.nonzero(free)
        target[leg == RETURN] = _nearest(np.stack([xs, ys], axis=1), pos[leg == RETURN])
    return leg, pos, target


def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
    """The robots' goals grounded as [ahead, right, fetch, deliver, return], [E, U, 5]."""
    out = np.zeros((*goals.shape, 5), np.float32)
    for e, w in enumerate(warehouses(ctx.env)):
        leg, pos, target = legs(w, np.asarray(goals[e], np.int64))
        f = FORWARD[[a.dir.value for a in w.agents]]
        v = target - pos
        scale = float(sum(w.grid_size))
        out[e, :, 0] = (v * f).sum(-1) / scale
        out[e, :, 1] = (v[:, 0] * -f[:, 1] + v[:, 1] * f[:, 0]) / scale
        out[e, np.arange(len(leg)), 2 + leg] = 1.0
    return out


def _moved_on(ctx: LayerContext) -> tuple[np.ndarray, np.ndarray]:
    """(picked a requested shelf, delivered one) this step, [E, U], from the legs before and after."""
    before, after = ctx.prev_goal_features[..., 2:], ctx.goal_features[..., 2:]
    return (before[..., FETCH] > 0) & (after[..., DELIVER] > 0), (before[..., DELIVER] > 0) & (after[..., RETURN] > 0)


def success(ctx: LayerContext) -> np.ndarray:
    """A robot reached its goal when it picked up its assigned shelf or delivered a shelf, [E, U]."""
    picked, delivered = _moved_on(ctx)
    mine = np.zeros_like(picked)
    for e, w in enumerate(warehouses(ctx.env)):
        k = np.clip(np.asarray(ctx.goals[e], np.int64), 0, len(w.request_queue) - 1)
        mine[e] = [a.carrying_shelf is w.request_queue[j] for a, j in zip(w.agents, k)]
    return (picked & mine) | delivered


def first_picks(env: Any, picked: np.ndarray) -> np.ndarray:
    """Of the robots that lifted a requested shelf this step (picked [U]), those lifting it for the
    first time since it was requested, [U]; marks those shelves in env.picked (a RwareEnv's). A
    shelf set down and lifted again is no new pick, so a pick reward cannot be farmed that way."""
    w = env.env.unwrapped
    env.picked &= {id(s) for s in w.request_queue}     # a delivered shelf may be requested, and picked, again
    first = np.zeros(len(w.agents), bool)
    for u in np.flatnonzero(picked):
        shelf = id(w.agents[u].carrying_shelf)
        if shelf not in env.picked:
            env.picked.add(shelf)
            first[u] = True
    return first


def progress(ctx: LayerContext) -> np.ndarray:
    """+1 per cell closer to the leg's target (0 when the leg changed), +1 per delivery and per first
    pick of a requested shelf since it was requested (first_picks)."""
    prev, now = ctx.prev_goal_features, ctx.goal_features
    same = (prev[..., 2:] == now[..., 2:]).all(-1)
    step = (np.abs(prev[..., :2]).sum(-1) - np.abs(now[..., :2]).sum(-1)) * float(sum(warehouses(ctx.env)[0].grid_size))
    picked, delivered = _moved_on(ctx)
    warehouses(ctx.env)                                 # refuses a ctx.env without the rware envs
    first = np.stack([first_picks(env, p) for env, p in zip(ctx.env.raw_envs, picked)])
    return np.where(same, np.clip(step, -1, 1), 0.0) + first + delivered


def flat_shaping(ctx: LayerContext) -> np.ndarray:
    """The flat team's goal-free shaping, [E, U]: the robots' `progress` with the assigned shelf
    replaced by the nearest requested shelf that no robot carries (no progress term on a fetch leg
    while every requested shelf is carried), +1 for the first pick of a requested shelf since it was
    requested, +1 for a delivery. Reads each env's state before the step (RwareEnv.before) and after."""
    rows = []
    for env in ctx.env.raw_envs:
        w, b = env.env.unwrapped, env.before
        free = [s for s in w.request_queue if all(a.carrying_shelf is not s for a in w.agents)]
        pos_now = np.array([(a.x, a.y) for a in w.agents])
        goals = np.zeros(len(w.agents), np.int64)
        if free:      # legs() takes queue indices: the nearest free requested shelf of each robot
            cells = np.array([(s.x, s.y) for s in free])
            near = np.abs(pos_now[:, None, :] - cells[None, :, :]).sum(-1).argmin(axis=1)
            goals = np.array([w.request_queue.index(free[k]) for k in near])
        leg, pos, target = legs(w, goals)
        r = np.zeros(len(w.agents))
        if b is not None:
            leg_before = np.array([FETCH if c is None else DELIVER if id(c) in b.queued else RETURN
                                   for c in b.carrying])
            step = np.abs(b.pos - target).sum(-1) - np.abs(pos - target).sum(-1)
            on = (leg_before == leg) & ((leg != FETCH) | bool(free))
            r += np.where(on, np.clip(step, -1, 1), 0.0)
            r += first_picks(env, (leg_before == FETCH) & (leg == DELIVER))
            r += (leg_before == DELIVER) & (leg == RETURN)
        rows.append(r)
    return np.asarray(rows, np.float64)


def dispatcher_view(robots: int, queue: int):
    """The dispatcher's observation: robots (x, y, carrying requested, carrying other), shelves (x, y, carried)."""
    def observe(ctx: LayerContext) -> np.ndarray:
        rows = []
        for w in warehouses(ctx.env):
            size = np.array(w.grid_size[::-1]) - 1.0
            carried = {id(a.carrying_shelf) for a in w.agents}
            queued = {id(s) for s in w.request_queue}
            bots = [(a.x / size[0], a.y / size[1], id(a.carrying_shelf) in queued,
                     a.carrying_shelf is not None and id(a.carrying_shelf) not in queued) for a in w.agents]
            shelves = [(s.x / size[0], s.y / size[1], id(s) in carried) for s in w.request_queue]
            rows.append(np.concatenate([np.ravel(bots), np.ravel(shelves)]))
        return np.asarray(rows, np.float32)[:, None, :]
    return observe, spaces.Box(0.0, 1.0, (4 * robots + 3 * queue,), np.float32)


def queue_size(cfg: RwareConfig) -> tuple[int, int]:
    """(robots, request queue size) of the config, as rware registers them."""
    env_id(cfg)                                      # raises for a size rware does not register
    robots = int(cfg.size.split("-")[1][:-2])
    queue = int(robots * (0.5 if cfg.hard else 1))
    if queue < 1:
        raise ScenarioError(f"size={cfg.size} hard=true requests no shelf", "use hard=false or more robots",
                            where="scenario 'rware'")
    return robots, queue


def make_layers(cfg: RwareConfig) -> list[Layer]:
    if cfg.layers == 1:
        return [Layer("low", intrinsic=flat_shaping, w_int=0.0)]
    if cfg.layers != 2:
        raise ScenarioError(f"layers={cfg.layers}", "use layers=1 (flat) or layers=2 (a dispatcher over the robots)",
                            where="scenario 'rware'")
    robots, queue = queue_size(cfg)
    observe, space = dispatcher_view(robots, queue)
    return [
        Layer("high", interval=10, goal_space=spaces.Discrete(queue), choice="per_child",
              goal_features=ground, goal_features_space=GOAL_BOX, goal_success=success,
              observe=observe, observe_space=space),
        Layer("low", intrinsic=progress, w_int=0.05),
    ]


SCENARIO = Scenario(
    name="rware",
    description="RWARE 2.0 warehouse (size=tiny-2ag|tiny-4ag|small-4ag, hard): flat, or a dispatcher "
                "assigning requested shelves (layers=2)",
    env=make_env, graph=lambda cfg, agents: AgentGraph.team(agents, cfg.layers, len(agents)),
    layers=make_layers, config=RwareConfig, episode_info=episode_info)
