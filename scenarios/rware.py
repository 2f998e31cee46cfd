"""rware: the multi-robot warehouse (RWARE 2.0, EPyMARL's benchmark), trained on a native batch.

Training steps `RwareBatch` (hdppo.sims.rware_batch: E warehouses as numpy arrays, stepping as
rware 2.0 itself for the same seeds and actions); the scenario's PettingZoo env (`env(cfg)`, for
`hdppo check`'s API test and for driving a loaded team) is rware's own through GymnasiumMultiAgent.
The hooks read the same state arrays from either (`world`).

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
  frame (ahead, right) / (width + height) and the leg one-hot. Success: the robot lifted that shelf
  for the first time since it was requested, or delivered one (lifting it again is no new
  success). The robots' intrinsic reward (w_int 0.05): +1 per cell of progress along their leg,
  +1 for a delivery and for the first pick of a requested shelf since it was requested (setting a
  shelf down and lifting it again earns nothing). The dispatcher observes every
  robot (x, y, carrying a requested shelf, carrying another) and every requested shelf (x, y,
  carried), coordinates / grid size.
  `free_goals=true`: the dispatcher may assign only requested shelves no robot carries (off by
  default, as the runs made before it). `hold=true`: a robot keeps the request it was given until
  it lifts that shelf or another robot does (off by default). `carry_potential=true`: the robots'
  reward pays every lift of a requested shelf +1 and its set-down undelivered -1 (a lift-and-set-down
  loop nets 0 and each set-down costs at once) in place of the first pick's +1 (off by default).
  Untrained (`--skills`, `--layer low`), the dispatcher is scripted: `greedy_dispatch` sends the
  robots carrying nothing to the requested shelves no robot carries, nearest pair first.

The flat team's goal-free shaping (`layers=1`, weighted by `w_int.low`, 0 by default so the flat
team learns from the env reward alone): the robots' shaping with the dispatcher's goal replaced by
the nearest requested shelf no robot carries: +1 per cell of progress along the leg, +1 for the
first pick of a requested shelf since it was requested (a shelf set down and lifted again earns no
second one), +1 for a delivery. `layers=1 w_int.low=0.05` gives it the robots' weight.
`compass=true` (layers=1) appends to each robot's observation the target that shaping measures
progress to, grounded as the dispatcher's robots' goal (`compass`). `carry_potential=true` pays its
picks as the robots' (every lift +1, a set-down undelivered -1).

Episode metric (`hdppo eval`, `hdppo plot`): `deliveries` (requested shelves delivered). See
docs/scenarios/rware.md.

    pip install 'hdppo[rware]'
    hdppo check rware size=tiny-4ag hard=true layers=2
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, LayerContext, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import GymnasiumMultiAgent
from hdppo.sims.rware_batch import Before, RwareBatch
from hdppo.sims.rware_layout import layout

SIZE = re.compile(r"(tiny|small|medium|large)-([1-9]|1[0-9])ag")
FORWARD = np.array([(0, -1), (0, 1), (-1, 0), (1, 0)])   # (dx, dy) facing rware's Direction UP, DOWN, LEFT, RIGHT
FETCH, DELIVER, RETURN = range(3)                        # a robot's leg
FAR = np.iinfo(np.int64).max                            # a distance no cell has
COMPASS_DIM = 5                                          # [ahead, right, fetch, deliver, return]
GOAL_BOX = spaces.Box(np.array([-1, -1, 0, 0, 0], np.float32), np.ones(5, np.float32), dtype=np.float32)


@dataclass
class RwareConfig(ScenarioConfig):
    size: str = "tiny-2ag"      # tiny-2ag, tiny-4ag, small-4ag (any {tiny,small,medium,large}-Nag, N < 20)
    hard: bool = False          # request queue = robots // 2 (rware's -hard), else one per robot
    layers: int = 1             # 1 flat; 2 a dispatcher assigning requested shelves to robots
    compass: bool = False       # layers=1: the robots also observe `compass` (5 numbers)
    free_goals: bool = False    # layers=2: the dispatcher may assign only requested shelves no robot carries
    hold: bool = False          # layers=2: a robot keeps its shelf until it lifts it or another robot does
    carry_potential: bool = False   # robots' shaping: every lift of a requested shelf +1, its set-down undelivered -1


def env_id(cfg: RwareConfig) -> str:
    """The registered rware id of the config, e.g. rware-tiny-4ag-hard-v2."""
    if not SIZE.fullmatch(cfg.size):
        raise ScenarioError(f"size={cfg.size!r}", "use tiny-2ag, tiny-4ag or small-4ag (or another "
                            "{tiny,small,medium,large}-Nag with 1 <= N <= 19)", where="scenario 'rware'")
    return f"rware-{cfg.size}{'-hard' if cfg.hard else ''}-v2"


@dataclass
class Snapshot:
    """The robots' state before an env step of the PettingZoo env, for the flat shaping: positions
    [U, 2] (x, y), the shelf each carries (None if none) and the ids of the requested shelves."""

    pos: np.ndarray
    carrying: list[Any]
    queued: set[int]


class RwareEnv(GymnasiumMultiAgent):
    """One rware env as a PettingZoo ParallelEnv that also counts the episode's deliveries and lifts,
    keeps the robots' state before the last step (`before`) for the flat shaping; with `compass=True`
    each robot's observation ends with `compass` (as CompassBatch's)."""

    deliveries = 0.0
    lifts = 0.0

    def __init__(self, *args: Any, compass: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before: Snapshot | None = None
        self.picked: set[int] = set()      # requested shelves whose pick the flat shaping has rewarded
        self.compass = compass
        if compass:
            n = spaces.flatdim(self._obs_spaces[self.possible_agents[0]])
            space = spaces.Box(-np.inf, np.inf, (n + COMPASS_DIM,), np.float32)
            self._obs_spaces = {a: space for a in self.possible_agents}

    def _obs(self, raw: Any) -> dict[str, Any]:
        if not self.compass:
            return super()._obs(raw)
        more = compass(Warehouses([self]))[0]
        return {a: np.concatenate([np.asarray(ob, np.float32).reshape(-1), c])
                for (a, ob), c in zip(zip(self.possible_agents, raw), more)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.deliveries = self.lifts = 0.0
        self.before, self.picked = None, set()
        return super().reset(seed=seed, options=options)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        w: Any = self.env.unwrapped          # rware.Warehouse
        self.before = Snapshot(np.array([(a.x, a.y) for a in w.agents]), [a.carrying_shelf for a in w.agents],
                               {id(s) for s in w.request_queue})
        out = super().step(actions)
        self.deliveries += sum(out[1].values())        # individual reward: +1 per delivery
        self.lifts += sum(b is None and a.carrying_shelf is not None and id(a.carrying_shelf) in self.before.queued
                          for a, b in zip(w.agents, self.before.carrying))
        return out


def make_env(cfg: RwareConfig) -> RwareEnv:
    import gymnasium as gym
    import rware  # noqa: F401 - registers the rware-* ids

    name = env_id(cfg)
    env = gym.make(name, disable_env_checker=True)
    return RwareEnv(env, [f"robot_{i}" for i in range(queue_size(cfg)[0])], name="rware", compass=cfg.compass)


def episode_info(env: RwareEnv) -> dict[str, float]:
    """The episode's deliveries and lifts of requested shelves of one PettingZoo copy (the native batch
    reports its own: RwareBatch.episode_info)."""
    return {"deliveries": float(env.deliveries), "lifts": float(env.lifts)}


def make_batch(cfg: RwareConfig, n_envs: int, seed: int | None) -> RwareBatch:
    """The scenario's native batch: E warehouses stepping as rware itself (hdppo.sims.rware_batch)."""
    queue_size(cfg)                                  # the scenario's own errors for a bad size
    return (CompassBatch if cfg.compass else RwareBatch)(cfg.size, cfg.hard, n_envs, seed)


# ---- the dispatcher: state read from the warehouses behind ctx.env --------------------------------
class Warehouses:
    """RwareBatch's state arrays (x, y, dir, carrying, shelf_x, shelf_y, queue, requested, shelf_at,
    before, picked, highways, goals, grid_size) read from rware's own Warehouse objects: the copies
    of the scenario's PettingZoo env (RwareEnv). `keep_picked` writes `picked` back to them."""

    def __init__(self, envs: list[RwareEnv]) -> None:
        self.envs = envs
        ws: list[Any] = [e.env.unwrapped for e in envs]      # rware.Warehouse
        self.grid_size = tuple(ws[0].grid_size)
        self.highways = np.asarray(ws[0].highways) > 0
        self.goals = np.array(ws[0].goals)
        self.x = np.array([[a.x for a in w.agents] for w in ws], np.int64)
        self.y = np.array([[a.y for a in w.agents] for w in ws], np.int64)
        self.dir = np.array([[a.dir.value for a in w.agents] for w in ws], np.int64)
        self.carrying = np.array([[_id(a.carrying_shelf) for a in w.agents] for w in ws], np.int64)
        self.shelf_x = np.array([[s.x for s in w.shelfs] for w in ws], np.int64)
        self.shelf_y = np.array([[s.y for s in w.shelfs] for w in ws], np.int64)
        self.queue = np.array([[s.id - 1 for s in w.request_queue] for w in ws], np.int64)
        self.requested = np.zeros(self.shelf_x.shape, bool)
        np.put_along_axis(self.requested, self.queue, True, axis=1)
        self.shelf_at = np.stack([w.grid[1] for w in ws]).astype(np.int64) - 1     # grid[1]: shelf ids
        valid = np.array([e.before is not None for e in envs])
        like = Snapshot(np.stack([self.x[0], self.y[0]], 1), [None] * self.x.shape[1], set())
        snaps = [like if e.before is None else e.before for e in envs]
        self.before = Before(np.array([b.pos[:, 0] for b in snaps], np.int64),
                             np.array([b.pos[:, 1] for b in snaps], np.int64),
                             np.array([[_id(c) for c in b.carrying] for b in snaps], np.int64),
                             np.array([[id(s) in b.queued for s in w.shelfs] for b, w in zip(snaps, ws)]), valid)
        self.picked = np.array([[id(s) in e.picked for s in w.shelfs] for e, w in zip(envs, ws)])

    def keep_picked(self) -> None:
        for env, flags in zip(self.envs, self.picked):
            shelves: list[Any] = env.env.unwrapped.shelfs    # type: ignore[attr-defined]
            env.picked = {id(s) for s, f in zip(shelves, flags) if f}


def _id(shelf: Any) -> int:
    return -1 if shelf is None else int(shelf.id) - 1


def world(env: Any) -> Any:
    """The warehouses' state arrays behind a hook's ctx.env: the scenario's RwareBatch itself (or one
    passed to hdppo.load as sim=), or `Warehouses` over the copies of its PettingZoo env (raw_envs)."""
    raw = getattr(env, "raw_envs", None)
    if raw is not None:
        return Warehouses(list(raw))
    if hasattr(env, "carrying") and hasattr(env, "queue"):
        return env
    raise ScenarioError(f"rware's goal hooks read the warehouse's state, but ctx.env is a {type(env).__name__}",
                        "with hdppo.load, pass sim=RwareBatch(size, hard) stepped as your warehouse, or "
                        "sim=SimpleNamespace(raw_envs=[env]) (env: the scenario's PettingZoo env)",
                        where="scenario 'rware'")


@functools.lru_cache(maxsize=8)
def _cells(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The grid's cells (x, y) [C, 2] in row-major order and their Manhattan distances [C, C]."""
    ys, xs = np.divmod(np.arange(height * width), width)
    cells = np.stack([xs, ys], axis=1)
    dist = np.abs(cells[:, None, :] - cells[None, :, :]).sum(-1)
    for a in (cells, dist):
        a.setflags(write=False)                           # shared by every caller (cached)
    return cells, dist


def _within(a: np.ndarray, high: int, low: int = 0) -> np.ndarray:
    """a clipped to [low, high] (np.clip's own checks cost more than the clip on these small arrays)."""
    return np.minimum(np.maximum(a, low), high)


def _argnearest(dist: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The index of the nearest allowed entry along the last axis (the first on a tie)."""
    return np.where(ok, dist, FAR).argmin(axis=-1)


def leg_of(carrying: np.ndarray, requested: np.ndarray) -> np.ndarray:
    """Each robot's leg [E, U] from the shelf it carries (-1: none) and the requested flags [E, S]."""
    rows = np.arange(len(carrying))[:, None]
    return np.where(carrying < 0, FETCH, np.where(requested[rows, np.maximum(carrying, 0)], DELIVER, RETURN))


def legs(w: Any, goals: np.ndarray, at: tuple[np.ndarray, np.ndarray] | None = None,
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each robot's leg [E, U], position [E, U, 2] and target cell [E, U, 2] (x, y) under goals [E, U];
    `at` = (x, y) [E, U] puts the robots in other cells of the same warehouse state."""
    rows = np.arange(w.x.shape[0])[:, None]
    x, y = (w.x, w.y) if at is None else at
    pos = np.stack([x, y], axis=-1)
    leg = leg_of(w.carrying, w.requested)
    k = w.queue[rows, _within(goals, w.queue.shape[1] - 1)]
    target = np.stack([w.shelf_x[rows, k], w.shelf_y[rows, k]], axis=-1)
    deliver, back = leg == DELIVER, leg == RETURN
    H, W = w.grid_size
    cells, dist = _cells(H, W)
    here = y * W + x                                      # each robot's cell index
    if deliver.any():
        goal_cells = np.asarray(w.goals, np.int64)
        near = dist[here[deliver]][:, goal_cells[:, 1] * W + goal_cells[:, 0]].argmin(axis=1)
        target[deliver] = goal_cells[near]
    if back.any():      # shelf cells without a shelf, and the returning robots' own (under the shelf they carry)
        shelf_cell = ~np.asarray(w.highways, bool)
        e, u = np.nonzero(back)
        free = shelf_cell[None] & (np.asarray(w.shelf_at) < 0)
        free[e, y[e, u], x[e, u]] |= shelf_cell[y[e, u], x[e, u]]
        target[back] = cells[_argnearest(dist[here[back]], free.reshape(len(free), -1)[e])]
    return leg, pos, target


def in_frame(w: Any, leg: np.ndarray, pos: np.ndarray, target: np.ndarray) -> np.ndarray:
    """[ahead, right, fetch, deliver, return], [E, U, 5]: the vector from pos to target in each robot's
    frame / (width + height), and its leg one-hot."""
    f = FORWARD[w.dir]
    v = target - pos
    scale = float(sum(w.grid_size))
    out = np.zeros((*leg.shape, 5), np.float32)
    out[..., 0] = (v * f).sum(-1) / scale
    out[..., 1] = (v[..., 0] * -f[..., 1] + v[..., 1] * f[..., 0]) / scale
    np.put_along_axis(out, (2 + leg)[..., None], 1.0, axis=-1)
    return out


def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
    """The robots' goals grounded as [ahead, right, fetch, deliver, return], [E, U, 5]."""
    w = world(ctx.env)
    return in_frame(w, *legs(w, np.asarray(goals, np.int64)))


def free_requests(w: Any) -> np.ndarray:
    """[E, Q]: which queue entries are requested shelves no robot carries."""
    carried = np.zeros(w.requested.shape, bool)
    e, u = np.nonzero(w.carrying >= 0)
    carried[e, w.carrying[e, u]] = True
    return np.asarray(~carried[np.arange(len(carried))[:, None], w.queue])


def nearest_free(w: Any, x: np.ndarray, y: np.ndarray, free: np.ndarray) -> np.ndarray:
    """[E, U]: the queue entry of the free request (free [E, Q]) nearest each cell (x, y) [E, U]; 0
    in a copy where none is free."""
    rows = np.arange(len(free))[:, None]
    H, W = w.grid_size
    _, dist = _cells(H, W)
    shelf_cells = w.shelf_y[rows, w.queue] * W + w.shelf_x[rows, w.queue]
    return _argnearest(dist[(y * W + x)[:, :, None], shelf_cells[:, None, :]], free[:, None, :])


def compass(w: Any) -> np.ndarray:
    """The flat robots' goal-free compass (`compass=true`), [E, U, 5]: `in_frame` toward the target
    the flat shaping measures progress to (the nearest requested shelf no robot carries, then the
    nearest delivery cell, then the nearest free shelf cell); the vector is 0 on a fetch leg while
    every requested shelf is carried."""
    free = free_requests(w)
    leg, pos, target = legs(w, nearest_free(w, w.x, w.y, free))
    out = in_frame(w, leg, pos, target)
    out[..., :2] *= ~((leg == FETCH) & ~np.asarray(free.any(axis=1))[:, None])[..., None]
    return out


def _moved_on(ctx: LayerContext) -> tuple[np.ndarray, np.ndarray]:
    """(picked a requested shelf, delivered one) this step, [E, U], from the legs before and after."""
    before, after = ctx.prev_goal_features[..., 2:], ctx.goal_features[..., 2:]
    return (before[..., FETCH] > 0) & (after[..., DELIVER] > 0), (before[..., DELIVER] > 0) & (after[..., RETURN] > 0)


def success(ctx: LayerContext) -> np.ndarray:
    """A robot reached its goal when it lifted its assigned shelf for the first time since it was
    requested, or delivered a shelf, [E, U]. A shelf set down and lifted again is no new success
    (robots toggling one shelf would look as successful as robots delivering)."""
    first, delivered = _step_moves(ctx)
    w = world(ctx.env)
    rows = np.arange(w.x.shape[0])[:, None]
    k = _within(np.asarray(ctx.goals, np.int64), w.queue.shape[1] - 1)
    mine = w.carrying == w.queue[rows, k]
    return (first & mine) | delivered


def _step_moves(ctx: LayerContext) -> tuple[np.ndarray, np.ndarray]:
    """(first picks, deliveries) of the robots this step, [E, U], computed once per step's context:
    first_picks marks the shelves it counts, so the robots' reward (progress) and their success,
    which read one context, must share one answer, in either order."""
    moves = ctx.__dict__.get("_rware_moves")
    if moves is None:
        picked, delivered = _moved_on(ctx)
        moves = ctx.__dict__["_rware_moves"] = (first_picks(world(ctx.env), picked), delivered)
    return moves


def first_picks(w: Any, picked: np.ndarray) -> np.ndarray:
    """Of the robots that lifted a requested shelf this step (picked [E, U]), those lifting it for the
    first time since it was requested, [E, U]; marks those shelves in w.picked [E, S]. A shelf set
    down and lifted again is no new pick, so a pick reward cannot be farmed that way."""
    w.picked &= w.requested                   # a delivered shelf may be requested, and picked, again
    e, u = np.nonzero(picked)
    shelf = w.carrying[e, u]
    first = np.zeros(picked.shape, bool)
    first[e, u] = ~w.picked[e, shelf]
    w.picked[e, shelf] = True
    if hasattr(w, "keep_picked"):
        w.keep_picked()
    return first


def progress(ctx: LayerContext) -> np.ndarray:
    """+1 per cell closer to the leg's target (0 when the leg changed), +1 per delivery and per first
    pick of a requested shelf since it was requested (first_picks)."""
    w = world(ctx.env)
    prev, now = ctx.prev_goal_features, ctx.goal_features
    same = (prev[..., 2:] == now[..., 2:]).all(-1)
    step = (np.abs(prev[..., :2]).sum(-1) - np.abs(now[..., :2]).sum(-1)) * float(sum(w.grid_size))
    first, delivered = _step_moves(ctx)
    return np.where(same, _within(step, 1, -1), 0.0) + first + delivered


def set_downs(leg_before: np.ndarray, leg: np.ndarray) -> np.ndarray:
    """[E, U]: the robots that set a requested shelf down undelivered this step (deliver leg -> fetch)."""
    return (leg_before == DELIVER) & (leg == FETCH)


def carried_progress(ctx: LayerContext) -> np.ndarray:
    """`progress` with the pick paid as a potential (`carry_potential=true`): +1 for every lift of a
    requested shelf, -1 for setting one down undelivered, so a robot that lifts and sets down a shelf
    nets 0 per round and pays at once for each set-down (with first picks only, a set-down cost
    nothing and a re-lift earned nothing, so the two-step loop was free)."""
    picked, _ = _moved_on(ctx)
    first, _ = _step_moves(ctx)
    legs_now = ctx.goal_features[..., 2:].argmax(-1)
    legs_before = ctx.prev_goal_features[..., 2:].argmax(-1)
    return progress(ctx) + (picked & ~first) - set_downs(legs_before, legs_now)


def flat_shaping(ctx: LayerContext, carry: bool = False) -> np.ndarray:
    """The flat team's goal-free shaping, [E, U]: the robots' `progress` with the assigned shelf
    replaced by the nearest requested shelf that no robot carries (no progress term on a fetch leg
    while every requested shelf is carried), +1 for the first pick of a requested shelf since it was
    requested, +1 for a delivery. Progress is a potential difference: the distance to the nearest
    target of the leg from the robot's cell before the step minus that from its cell after, both in
    the warehouse after the step, so a robot moving back and forth earns nothing net (measured to the
    target nearest the new cell only, a robot between two equally near shelves earned +1 each way).
    Reads the state before the step (`before`) and after; 0 in a copy not stepped since its reset.
    With carry=True (`carry_potential=true`) every lift of a requested shelf pays +1 and a set-down
    undelivered -1, as `carried_progress`."""
    w = world(ctx.env)
    free = free_requests(w)
    b = w.before
    leg, pos, target = legs(w, nearest_free(w, w.x, w.y, free))
    _, pos_b, target_b = legs(w, nearest_free(w, b.x, b.y, free), at=(b.x, b.y))
    leg_before = leg_of(b.carrying, b.requested)
    step = np.abs(pos_b - target_b).sum(-1) - np.abs(pos - target).sum(-1)
    on = (leg_before == leg) & ((leg != FETCH) | np.asarray(free.any(axis=1))[:, None]) & b.valid[:, None]
    r = np.where(on, _within(step, 1, -1), 0.0)
    picked = (leg_before == FETCH) & (leg == DELIVER) & b.valid[:, None]
    first = first_picks(w, picked)
    r += picked if carry else first
    r += (leg_before == DELIVER) & (leg == RETURN) & b.valid[:, None]
    if carry:
        r -= set_downs(leg_before, leg) & b.valid[:, None]
    return np.asarray(r, np.float64)


def free_goal_mask(ctx: LayerContext) -> np.ndarray:
    """The dispatcher's legal goals with `free_goals=true`, bool [E, 1, Q]: the queue entries no robot
    carries (a carried shelf is someone's already; a robot sent after it chases a shelf it cannot
    lift). Where every request is carried, any (hdppo.team.goal_mask lets a row of none give all)."""
    return free_requests(world(ctx.env))[:, None, :]


def held_goal_mask(free_only: bool) -> Any:
    """The dispatcher's legal goals with `hold=true`, per child slot (slot u: robot u), bool [E, 1, U, Q]:
    a robot carrying nothing keeps the request it holds while no robot carries that shelf (a goal
    stands until it is lifted, as the scripted dispatcher's mostly do); the others may get any
    request, or with `free_goals=true` any request no robot carries."""
    def hook(ctx: LayerContext) -> np.ndarray:
        w = world(ctx.env)
        free = free_requests(w)                                           # [E, Q]
        rows = np.arange(len(free))[:, None]
        k = _within(np.asarray(ctx.child_goals, np.int64)[:, 0], free.shape[1] - 1)     # [E, U]
        keep = np.asarray(ctx.child_holds, bool)[:, 0] & (w.carrying < 0) & free[rows, k]
        others = free if free_only else np.ones_like(free)
        held = np.arange(free.shape[1]) == k[..., None]
        return np.where(keep[..., None], held, others[:, None, :])[:, None]
    return hook


def dispatcher_view(robots: int, queue: int):
    """The dispatcher's observation: robots (x, y, carrying requested, carrying other), shelves (x, y, carried)."""
    def observe(ctx: LayerContext) -> np.ndarray:
        w = world(ctx.env)
        E = w.x.shape[0]
        rows = np.arange(E)[:, None]
        sx, sy = np.array(w.grid_size[::-1]) - 1.0
        leg = leg_of(w.carrying, w.requested)
        bots = np.stack([w.x / sx, w.y / sy, leg == DELIVER, leg == RETURN], axis=-1)
        carried = (w.queue[:, :, None] == w.carrying[:, None, :]).any(-1)
        shelves = np.stack([w.shelf_x[rows, w.queue] / sx, w.shelf_y[rows, w.queue] / sy, carried], axis=-1)
        return np.concatenate([bots.reshape(E, -1), shelves.reshape(E, -1)], axis=1).astype(np.float32)[:, None, :]
    return observe, spaces.Box(0.0, 1.0, (4 * robots + 3 * queue,), np.float32)


def greedy_dispatch(robots: int, queue: int, grid_size: tuple[int, int]):
    """The dispatcher's scripted goals (its goal sampler for `--skills`), from its own observation:
    the requested shelves no robot carries go, nearest pair first, one each to the robots carrying
    nothing (by Manhattan distance in cells); a robot left over gets its nearest such shelf, one
    with none free goal 0 (a carrying robot's goal does not change its leg). Recomputed at each
    decision, a matched pair stays matched while its robot closes in, so a goal mostly stays in
    force until the robot lifts its shelf, where a uniform draw every `interval.high` steps would
    send two robots after one shelf and switch half the goals before they are reached."""
    H, W = grid_size
    n_view = 4 * robots + 3 * queue

    def act(decision: Any) -> np.ndarray:
        obs = np.asarray(decision.obs)                          # [E, robots, D]: one dispatcher's slots
        E = obs.shape[0]
        bots = obs[:, 0, :4 * robots].reshape(E, robots, 4)
        shelves = obs[:, 0, 4 * robots:n_view].reshape(E, queue, 3)
        bx, by = bots[..., 0] * (W - 1), bots[..., 1] * (H - 1)
        sx, sy = shelves[..., 0] * (W - 1), shelves[..., 1] * (H - 1)
        d = np.abs(bx[:, :, None] - sx[:, None]) + np.abs(by[:, :, None] - sy[:, None])   # [E, U, Q]
        free = np.asarray(shelves[..., 2] < 0.5)                # [E, Q] requested, no robot carries it
        idle = np.asarray((bots[..., 2] < 0.5) & (bots[..., 3] < 0.5))   # [E, U] carrying nothing
        goals = np.where(np.any(free, axis=1, keepdims=True), np.where(free[:, None], d, np.inf).argmin(-1), 0)
        robot_open, shelf_open = idle.copy(), free.copy()
        rows = np.arange(E)
        for _ in range(min(robots, queue)):
            pair = np.where(robot_open[:, :, None] & shelf_open[:, None], d, np.inf).reshape(E, -1)
            best = pair.argmin(-1)
            ok = np.isfinite(pair[rows, best])
            u, k = np.divmod(best, queue)
            goals[rows[ok], u[ok]] = k[ok]
            robot_open[rows[ok], u[ok]] = False
            shelf_open[rows[ok], k[ok]] = False
        child = obs[..., -robots:].argmax(-1)                   # each slot's robot
        return np.take_along_axis(goals, child, axis=1).astype(np.int64)
    return act


def queue_size(cfg: RwareConfig) -> tuple[int, int]:
    """(robots, request queue size) of the config, as rware registers them."""
    env_id(cfg)                                      # raises for a size rware does not register
    robots = int(cfg.size.split("-")[1][:-2])
    queue = int(robots * (0.5 if cfg.hard else 1))
    if queue < 1:
        raise ScenarioError(f"size={cfg.size} hard=true requests no shelf", "use hard=false or more robots",
                            where="scenario 'rware'")
    return robots, queue


class CompassBatch(RwareBatch):
    """RwareBatch whose robots' observations end with `compass` (`layers=1 compass=true`)."""

    obs_extra = COMPASS_DIM

    def _observe(self) -> np.ndarray:
        return np.concatenate([super()._observe(), compass(self)], axis=-1)


def make_layers(cfg: RwareConfig) -> list[Layer]:
    if cfg.compass and cfg.layers != 1:
        raise ScenarioError(f"compass=true with layers={cfg.layers}", "use compass=true with layers=1: the "
                            "dispatcher's robots observe their goal, grounded the same way", where="scenario 'rware'")
    if cfg.hold and cfg.layers != 2:
        raise ScenarioError(f"hold=true with layers={cfg.layers}", "use hold=true with layers=2: it "
                            "keeps the dispatcher's goals", where="scenario 'rware'")
    if cfg.free_goals and cfg.layers != 2:
        raise ScenarioError(f"free_goals=true with layers={cfg.layers}", "use free_goals=true with layers=2: it "
                            "masks the dispatcher's goals", where="scenario 'rware'")
    if cfg.layers == 1:
        shaping = functools.partial(flat_shaping, carry=True) if cfg.carry_potential else flat_shaping
        return [Layer("low", intrinsic=shaping, w_int=0.0)]
    if cfg.layers != 2:
        raise ScenarioError(f"layers={cfg.layers}", "use layers=1 (flat) or layers=2 (a dispatcher over the robots)",
                            where="scenario 'rware'")
    robots, queue = queue_size(cfg)
    observe, space = dispatcher_view(robots, queue)
    return [
        Layer("high", interval=10, goal_space=spaces.Discrete(queue), choice="per_child",
              goal_features=ground, goal_features_space=GOAL_BOX, goal_success=success,
              observe=observe, observe_space=space, goal_mask=held_goal_mask(cfg.free_goals) if cfg.hold
              else free_goal_mask if cfg.free_goals else None,
              scripted=greedy_dispatch(robots, queue, layout(cfg.size, cfg.hard).grid_size)),
        Layer("low", intrinsic=carried_progress if cfg.carry_potential else progress, w_int=0.05),
    ]


SCENARIO = Scenario(
    name="rware",
    description="RWARE 2.0 warehouse (size=tiny-2ag|tiny-4ag|small-4ag, hard): flat, or a dispatcher "
                "assigning requested shelves (layers=2)",
    env=make_env, graph=lambda cfg, agents: AgentGraph.team(agents, cfg.layers, len(agents)),
    layers=make_layers, config=RwareConfig, batched_env=make_batch)
