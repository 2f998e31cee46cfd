"""The rware scenario's hooks as they read rware's own objects before the native batch (scenarios/rware.py
at the commit before it; `_moved_on`, which reads only the grounded legs, is the scenario's own): the
reference the batch-reading hooks must equal (tests/scenarios/test_rware_hooks_batch.py). Test code only;
ctx.env is a PettingZooBatch (raw_envs)."""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from hdppo import LayerContext
from hdppo.errors import ScenarioError
from hdppo.scenarios.rware import DELIVER, FETCH, FORWARD, RETURN, _moved_on  # reads the grounded legs only


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


def legs(w: Any, goals: np.ndarray, pos: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each robot's leg [U], position [U, 2] and target cell [U, 2] (x, y) under goals [U]; `pos`
    [U, 2] puts the robots in other cells of the same warehouse state."""
    pos = np.array([(a.x, a.y) for a in w.agents]) if pos is None else np.asarray(pos)
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


def success(ctx: LayerContext) -> np.ndarray:
    """A robot reached its goal when it lifted its assigned shelf for the first time since it was
    requested, or delivered a shelf, [E, U]."""
    first, delivered = _step_moves(ctx)
    mine = np.zeros_like(first)
    for e, w in enumerate(warehouses(ctx.env)):
        k = np.clip(np.asarray(ctx.goals[e], np.int64), 0, len(w.request_queue) - 1)
        mine[e] = [a.carrying_shelf is w.request_queue[j] for a, j in zip(w.agents, k)]
    return (first & mine) | delivered


def _step_moves(ctx: LayerContext) -> tuple[np.ndarray, np.ndarray]:
    """(first picks, deliveries) [E, U], once per context (first_picks marks what it counts)."""
    if "_ref_moves" not in ctx.__dict__:
        picked, delivered = _moved_on(ctx)
        warehouses(ctx.env)                             # refuses a ctx.env without the rware envs
        first = np.stack([first_picks(env, p) for env, p in zip(ctx.env.raw_envs, picked)])
        ctx.__dict__["_ref_moves"] = (first, delivered)
    return ctx.__dict__["_ref_moves"]


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
    first, delivered = _step_moves(ctx)
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

        def nearest_free(at: np.ndarray) -> np.ndarray:   # queue indices, as legs() takes them
            if not free:
                return np.zeros(len(w.agents), np.int64)
            cells = np.array([(s.x, s.y) for s in free])
            near = np.abs(at[:, None, :] - cells[None, :, :]).sum(-1).argmin(axis=1)
            return np.array([w.request_queue.index(free[k]) for k in near])
        leg, pos, target = legs(w, nearest_free(pos_now))
        r = np.zeros(len(w.agents))
        if b is not None:
            leg_before = np.array([FETCH if c is None else DELIVER if id(c) in b.queued else RETURN
                                   for c in b.carrying])
            _, _, target_b = legs(w, nearest_free(b.pos), pos=b.pos)   # from the cells before, in the warehouse now
            step = np.abs(b.pos - target_b).sum(-1) - np.abs(pos - target).sum(-1)
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
