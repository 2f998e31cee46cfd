"""WarehouseBatch: E copies of the warehouse as numpy arrays; `step` loops over neither copies nor robots.

A helper module for `scenarios/warehouse.py` (it defines no SCENARIO). Cells are (x, y), x the column,
y the row, index y * width + x. The layout (`Layout`, built once per size and cached):
- shelf rows at odd y from 1 to height-3; on each row shelves at x in [1, width//2-2] and
  [width//2+1, width-2]; aisles everywhere else (columns 0, width-1 and the two middle columns,
  rows between shelf rows, the row height-2);
- `n_stations` stations on the bottom row y = height-1, evenly spaced;
- 4 zones, the quadrants of the shelf area (left/right half, top/bottom half of the shelf rows);
  each zone has a home cell: the pick spot nearest the middle of its shelves.
Shelves are obstacles. An order is an item on one shelf; a robot picks it from any free cell
4-adjacent to that shelf (a "pick spot"). Path distances and first moves come from a BFS over the
static layout (robots are not obstacles for it).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo import EnvStep, NumpyBatch
from hdppo.sims import copy_rngs

DX = np.array([0, 0, 0, -1, 1], np.int64)     # actions: 0 stay, 1 up (y-1), 2 down (y+1), 3 left, 4 right
DY = np.array([0, -1, 1, 0, 0], np.int64)
RING = [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (-1, 1), (0, 1), (1, 1)]   # local view order
N_ZONES = 4
N_NEAR = 3                                  # nearest open orders in a robot's observation
FAR = 10 ** 6                               # "unreachable" distance
RANDOM_BLOCK = 64                           # steps of random numbers drawn per copy at a time

# robot observation layout (constant offsets; the widths do not depend on the config)
OFF_POS, OFF_CARRY, OFF_TIME = 0, 2, 3
OFF_ZONES = 4                               # per zone: home - pos (2), open orders / slots (1)
OFF_STATION = OFF_ZONES + 3 * N_ZONES       # nearest station: vector (2), path distance (1), first move (2)
OFF_ORDERS = OFF_STATION + 5                # per near order: vector (2), distance (1), first move (2), valid (1)
OFF_LOCAL = OFF_ORDERS + 6 * N_NEAR         # 8 neighbours blocked (wall/shelf), then 8 neighbours robot
OBS_DIM = OFF_LOCAL + 16
GOAL_DIM = 6                                # grounded robot goal: vector, distance, first move, has task


@dataclass(frozen=True)
class Layout:
    """The static warehouse: obstacles, shelves, stations, zones and BFS tables."""

    width: int
    height: int
    blocked: np.ndarray       # [C] shelf cells
    shelves: np.ndarray       # [S] cell of each shelf
    shelf_zone: np.ndarray    # [S] zone of each shelf
    stations: np.ndarray      # [NS] station cells
    is_station: np.ndarray    # [C]
    zone_home: np.ndarray     # [Z] home cell of each zone
    dist: np.ndarray          # [C, C] dist[t, c]: steps from c to t (FAR if blocked)
    move: np.ndarray          # [C, C] first action from c toward t
    shelf_dist: np.ndarray    # [S, C] steps from c to a pick spot of shelf s (0 = can pick)
    shelf_move: np.ndarray    # [S, C]
    station_dist: np.ndarray  # [C] steps to the nearest station
    station_move: np.ndarray  # [C]
    station_of: np.ndarray    # [C] nearest station cell
    ring: np.ndarray          # [C, 8] neighbour cells, C for outside the grid
    scale: float              # max(width, height) - 1: vectors are divided by it
    dmax: float               # largest finite path distance

    @property
    def cells(self) -> int:
        return self.width * self.height

    def xy(self, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return cell % self.width, cell // self.width


def _moves(dist_to: np.ndarray, step: np.ndarray) -> np.ndarray:
    """First action (1..4, 0 when there or unreachable) along a shortest path, for rows of distances [T, C]."""
    ext = np.concatenate([dist_to, np.full((len(dist_to), 1), FAR)], axis=1)
    out = np.zeros(dist_to.shape, np.int64)
    for a in (1, 2, 3, 4):
        ok = (out == 0) & (dist_to > 0) & (dist_to < FAR) & (ext[:, step[a]] == dist_to - 1)
        out[ok] = a
    return out


@lru_cache(maxsize=8)
def build_layout(width: int, height: int, n_stations: int) -> Layout:
    """The layout of a width x height warehouse (see the module docstring); raises ValueError if it does not fit."""
    W, H = int(width), int(height)
    if W < 6 or H < 6 or not 1 <= n_stations <= W:
        raise ValueError("the warehouse needs width >= 6, height >= 6 and 1 <= n_stations <= width")
    C = W * H
    x, y = np.arange(C) % W, np.arange(C) // W
    rows = np.arange(1, H - 2, 2)
    cols = np.r_[np.arange(1, W // 2 - 1), np.arange(W // 2 + 1, W - 1)]
    blocked = np.isin(y, rows) & np.isin(x, cols)
    shelves = np.flatnonzero(blocked)
    top = (len(rows) + 1) // 2
    shelf_zone = 2 * (y[shelves] >= rows[top]).astype(np.int64) + (x[shelves] >= W // 2)
    stations = (H - 1) * W + ((2 * np.arange(n_stations) + 1) * W) // (2 * n_stations)
    is_station = np.zeros(C, bool)
    is_station[stations] = True
    # neighbour of each cell per action (C = outside or blocked) and the 8-cell ring
    step = np.full((5, C), C, np.int64)
    for a in range(5):
        nx, ny = x + DX[a], y + DY[a]
        inside = (nx >= 0) & (nx < W) & (ny >= 0) & (ny < H)
        nb = np.where(inside, ny * W + nx, C)
        nb[inside] = np.where(blocked[nb[inside]], C, nb[inside])
        step[a] = nb
    ring = np.full((C, 8), C, np.int64)
    for k, (dx, dy) in enumerate(RING):
        nx, ny = x + dx, y + dy
        inside = (nx >= 0) & (nx < W) & (ny >= 0) & (ny < H)
        ring[inside, k] = (ny * W + nx)[inside]
    # all-pairs BFS by relaxation: dist[t, c] = 1 + min over free neighbours n of c of dist[t, n]
    dist = np.full((C, C), FAR, np.int64)
    free = np.flatnonzero(~blocked)
    dist[free, free] = 0
    while True:
        ext = np.concatenate([dist, np.full((C, 1), FAR)], axis=1)
        best = np.minimum.reduce([ext[:, step[a]] for a in (1, 2, 3, 4)]) + 1
        new = np.where(~blocked[None, :] & ~blocked[:, None], np.minimum(dist, best), FAR)
        if np.array_equal(new, dist):
            break
        dist = new
    if (dist[np.ix_(free, free)] >= FAR).any():
        raise ValueError("the warehouse layout is not connected")
    spots = [[n for n in step[1:, s] if n < C] for s in shelves]
    shelf_dist = np.stack([dist[sp].min(axis=0) for sp in spots])
    station_dist = dist[stations].min(axis=0)
    station_of = stations[dist[stations].argmin(axis=0)]
    # zone homes: the pick spot nearest the mean of the zone's shelves (not a station)
    pick = np.zeros(C, bool)
    pick[[n for sp in spots for n in sp]] = True
    homes = []
    for z in range(N_ZONES):
        zs = shelves[shelf_zone == z]
        mx, my = x[zs].mean(), y[zs].mean()
        cand = np.flatnonzero(pick & ~is_station)
        homes.append(cand[np.argmin((x[cand] - mx) ** 2 + (y[cand] - my) ** 2)])
    return Layout(W, H, blocked, shelves, shelf_zone, stations, is_station, np.array(homes), dist,
                  _moves(dist, step), shelf_dist, _moves(shelf_dist, step), station_dist,
                  _moves(station_dist[None], step)[0], station_of, ring, float(max(W, H) - 1),
                  float(dist[dist < FAR].max()))


class WarehouseBatch(NumpyBatch):
    """E warehouse copies of n_teams * team_size robots; see scenarios/warehouse.py for the rules.

    cfg needs: width, height, n_stations, n_teams, team_size, slots (open orders per zone),
    order_rate, max_steps, pick_reward, step_penalty.
    """

    def __init__(self, cfg: Any, n_envs: int = 1, seed: int | None = None) -> None:
        self.cfg = cfg
        self.layout = L = build_layout(cfg.width, cfg.height, cfg.n_stations)
        self.n_envs = E = int(n_envs)
        self.n_robots = U = cfg.n_teams * cfg.team_size
        self.slots = K = cfg.slots
        self.n_slots = Q = N_ZONES * K
        if U > int((~L.blocked & ~L.is_station).sum()):
            raise ValueError("more robots than free cells")
        self.units = [f"robot_{i}" for i in range(U)]
        self.slot_zone = np.arange(Q) // K
        self.obs_space = gym.spaces.Box(self._obs_low(), np.ones(OBS_DIM, np.float32), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.state_space = gym.spaces.Box(0.0, 1.0, (3 * U + 4 * Q + 1,), np.float32)
        self.action_mask = None
        self.cell = np.zeros((E, U), np.int64)
        self.carrying = np.zeros((E, U), bool)
        self.slot_shelf = np.full((E, Q), -1, np.int64)     # shelf index of each order slot, -1 empty
        self.slot_t = np.zeros((E, Q), np.int64)            # arrival step of each order
        self.t = np.zeros(E, np.int64)
        self.orders = np.zeros(E, np.int64)                 # orders arrived this episode (refused included)
        self.rejected = np.zeros(E, np.int64)               # arrivals refused: every zone's slots full
        self.deliveries = np.zeros(E, np.int64)
        self.last_pick = np.full((E, U), -1, np.int64)      # zone of the order each robot picked last step
        self.last_deliver = np.zeros((E, U), bool)
        self.alive = np.zeros((E, U), bool)
        self.obs = np.zeros((E, U, OBS_DIM), np.float32)
        self._free = np.flatnonzero(~L.blocked & ~L.is_station)
        self._wall = np.r_[L.blocked, True]                 # blocked, with the outside cell C
        self._block = np.zeros((E, RANDOM_BLOCK, 2))
        self._cursor = RANDOM_BLOCK
        self._rng = copy_rngs(seed, E)
        self.reset_done(np.ones(E, bool))

    @staticmethod
    def _obs_low() -> np.ndarray:
        low = np.zeros(OBS_DIM, np.float32)
        for z in range(N_ZONES):
            low[OFF_ZONES + 3 * z:OFF_ZONES + 3 * z + 2] = -1
        low[[OFF_STATION, OFF_STATION + 1, OFF_STATION + 3, OFF_STATION + 4]] = -1
        for j in range(N_NEAR):
            o = OFF_ORDERS + 6 * j
            low[[o, o + 1, o + 3, o + 4]] = -1
        return low

    # ---- episodes --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._cursor = RANDOM_BLOCK   # the pre-drawn block came from the old streams
        super().reset(seed)

    def reset_done(self, mask: np.ndarray) -> None:
        envs = np.flatnonzero(np.asarray(mask, bool))
        if len(envs) == 0:
            return
        U = self.n_robots
        picks = np.stack([self._rng[e].permutation(len(self._free))[:U] for e in envs])
        self.cell[envs] = self._free[picks]
        self.carrying[envs] = False
        self.slot_shelf[envs] = -1
        self._start(envs)

    def _start(self, envs: np.ndarray) -> None:
        self.t[envs] = 0
        self.orders[envs] = (self.slot_shelf[envs] >= 0).sum(axis=1)
        self.slot_t[envs] = 0
        self.rejected[envs] = 0
        self.deliveries[envs] = 0
        self.last_pick[envs] = -1
        self.last_deliver[envs] = False
        self.alive[envs] = True
        self.obs[envs] = self._observe()[envs]

    def place(self, e: int, robots: Sequence[tuple[int, int]], orders: Sequence[tuple[int, int]] = (),
              carrying: Sequence[bool] | None = None) -> None:
        """Start copy e from hand-given robot cells and order shelves ((x, y) each; tests, demos)."""
        L, W = self.layout, self.layout.width
        r = np.asarray(robots, np.int64).reshape(-1, 2)
        inside = ((r >= 0) & (r < [W, L.height])).all()
        cells = np.where(inside, r[:, 1] * W + r[:, 0], 0)
        if (not inside or len(cells) != self.n_robots or len(set(cells.tolist())) != len(cells)
                or L.blocked[cells].any()):
            raise ValueError(f"place() needs {self.n_robots} distinct free robot cells")
        self.slot_shelf[e] = -1
        for ox, oy in orders:
            s = np.flatnonzero(L.shelves == oy * W + ox)
            if len(s) != 1 or (self.slot_shelf[e] == s[0]).any():
                raise ValueError(f"order cell {(ox, oy)} is not a shelf, or holds an order already")
            free = np.flatnonzero((self.slot_zone == L.shelf_zone[s[0]]) & (self.slot_shelf[e] < 0))
            if len(free) == 0:
                raise ValueError(f"zone {L.shelf_zone[s[0]]} has no free order slot for {(ox, oy)}")
            self.slot_shelf[e, free[0]] = s[0]
        self.cell[e] = cells
        self.carrying[e] = False if carrying is None else np.asarray(carrying, bool)
        self._start(np.array([e]))

    # ---- stepping --------------------------------------------------------------------------
    def _resolve(self, live: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Cells after the moves with no overlap: see the no-overlap rule in scenarios/warehouse.py."""
        L, U = self.layout, self.n_robots
        x, y = L.xy(self.cell)
        nx, ny = x + DX[a], y + DY[a]
        inside = (nx >= 0) & (nx < L.width) & (ny >= 0) & (ny < L.height)
        want = np.where(inside, ny * L.width + nx, self.cell)
        want = np.where(live & ~L.blocked[want], want, self.cell)
        lower = np.tri(U, k=-1, dtype=bool)                                    # [i, j]: j < i
        other = ~np.eye(U, dtype=bool)
        for _ in range(U + 1):
            moving = want != self.cell
            same = (want[:, :, None] == want[:, None, :]) & other              # [E, i, j]
            blocked = same & (lower | ~moving[:, None, :])                     # j earlier, or j stays there
            swap = (want[:, :, None] == self.cell[:, None, :]) & (want[:, None, :] == self.cell[:, :, None]) & other
            cancel = moving & (blocked | swap).any(axis=2)
            if not cancel.any():
                break
            want = np.where(cancel, self.cell, want)
        return want

    def step(self, actions: np.ndarray) -> EnvStep:
        cfg, L = self.cfg, self.layout
        a = np.asarray(actions)
        if a.shape == self.alive.shape + (1,):
            a = a[..., 0]
        if a.shape != self.alive.shape:
            raise ValueError(f"actions have shape {a.shape}, expected {self.alive.shape}")
        a = a.astype(np.int64, copy=False)
        live = self.alive.copy()
        if (live & ((a < 0) | (a > 4))).any():
            raise ValueError("warehouse actions are 0..4 (stay, up, down, left, right)")
        a = np.where(live, a, 0)
        running = live.any(axis=1)
        self.cell = self._resolve(live, a)
        # deliveries: a carrying robot on a station hands its item over
        deliver = live & self.carrying & L.is_station[self.cell]
        self.carrying &= ~deliver
        # picks: an empty robot at a pick spot of an open order takes it (ties: lowest robot, then lowest slot)
        valid = self.slot_shelf >= 0
        at = L.shelf_dist[np.where(valid, self.slot_shelf, 0)[:, None, :], self.cell[:, :, None]] == 0
        cand = at & valid[:, None, :] & (live & ~self.carrying & ~deliver)[:, :, None]     # [E, U, Q]
        first = cand.argmax(axis=1)                                                         # [E, Q]
        won = cand & (np.arange(self.n_robots)[None, :, None] == first[:, None, :])
        slot = won.argmax(axis=2)                                                           # [E, U]
        pick = won.any(axis=2)
        self.last_pick = np.where(pick, self.slot_zone[slot], -1)
        self.last_deliver = deliver
        self.carrying |= pick
        e_idx, u_idx = np.nonzero(pick)
        self.slot_shelf[e_idx, slot[e_idx, u_idx]] = -1
        self.deliveries += deliver.sum(axis=1)
        self._arrive(running)
        rewards = deliver + np.float32(cfg.pick_reward) * pick - np.float32(cfg.step_penalty)
        rewards = np.where(live, rewards, 0.0).astype(np.float32)
        self.t += running
        truncated = live & (self.t >= cfg.max_steps)[:, None]
        self.alive = live & ~truncated
        self.obs = np.where(live[:, :, None], self._observe(), self.obs)
        return EnvStep(rewards, np.zeros_like(live), truncated, np.asarray(~self.alive.any(axis=1)))

    def _arrive(self, running: np.ndarray) -> None:
        """At most one order per running copy with probability order_rate, on a random shelf with no
        open order whose zone has a free slot (refused when there is none)."""
        L, E, K = self.layout, self.n_envs, self.slots
        if self._cursor >= RANDOM_BLOCK:
            for e in range(E):                          # once every RANDOM_BLOCK steps: per-copy streams
                self._block[e] = self._rng[e].random((RANDOM_BLOCK, 2))
            self._cursor = 0
        u = self._block[:, self._cursor]
        self._cursor += 1
        arrive = running & (u[:, 0] < self.cfg.order_rate)
        S = len(L.shelves)
        has = np.zeros((E, S + 1), bool)
        has[np.arange(E)[:, None], np.where(self.slot_shelf >= 0, self.slot_shelf, S)] = True
        zone_full = np.asarray((self.slot_shelf.reshape(E, N_ZONES, K) >= 0).all(axis=2))
        eligible = ~has[:, :S] & ~zone_full[:, L.shelf_zone]
        n = eligible.sum(axis=1)
        k = np.minimum((u[:, 1] * n).astype(np.int64), np.maximum(n - 1, 0))
        shelf = (eligible.cumsum(axis=1) > k[:, None]).argmax(axis=1)
        ok = arrive & (n > 0)
        self.orders += arrive
        self.rejected += arrive & (n == 0)
        envs = np.flatnonzero(ok)
        if len(envs):
            z = L.shelf_zone[shelf[envs]]
            free = self.slot_shelf[envs].reshape(len(envs), N_ZONES, K)[np.arange(len(envs)), z] < 0
            q = z * K + free.argmax(axis=1)
            self.slot_shelf[envs, q] = shelf[envs]
            self.slot_t[envs, q] = self.t[envs]

    # ---- observations ----------------------------------------------------------------------
    def _target(self, tx: np.ndarray, ty: np.ndarray, d: np.ndarray, move: np.ndarray) -> np.ndarray:
        """[vector (2), path distance (1), first move (2)] to targets at (tx, ty), [..., 5]."""
        L = self.layout
        x, y = L.xy(self.cell)
        if tx.ndim == 3:
            x, y = x[..., None], y[..., None]
        return np.stack([(tx - x) / L.scale, (ty - y) / L.scale, np.minimum(d, L.dmax) / L.dmax,
                         DX[move], DY[move]], axis=-1)

    def _order_dist(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per robot and slot: path distance to a pick spot (FAR for empty slots), first move, shelf."""
        L = self.layout
        valid = self.slot_shelf >= 0
        shelf = np.where(valid, self.slot_shelf, 0)
        d = L.shelf_dist[shelf[:, None, :], self.cell[:, :, None]]          # [E, U, Q]
        move = L.shelf_move[shelf[:, None, :], self.cell[:, :, None]]
        return np.where(valid[:, None, :], d, FAR), move, shelf

    def _observe(self) -> np.ndarray:
        """Fresh observations of every robot [E, U, D] from the current state."""
        L, cfg = self.layout, self.cfg
        E, U = self.n_envs, self.n_robots
        out = np.zeros((E, U, OBS_DIM), np.float32)
        x, y = L.xy(self.cell)
        out[..., 0], out[..., 1] = x / (L.width - 1), y / (L.height - 1)
        out[..., OFF_CARRY] = self.carrying
        out[..., OFF_TIME] = (self.t / cfg.max_steps)[:, None]
        hx, hy = L.xy(L.zone_home)
        counts = (self.slot_shelf >= 0).reshape(E, N_ZONES, self.slots).sum(axis=2) / self.slots
        zones = np.stack([(hx[None, None] - x[..., None]) / L.scale, (hy[None, None] - y[..., None]) / L.scale,
                          np.broadcast_to(counts[:, None, :], (E, U, N_ZONES))], axis=-1)
        out[..., OFF_ZONES:OFF_STATION] = zones.reshape(E, U, 3 * N_ZONES)
        sx, sy = L.xy(L.station_of[self.cell])
        out[..., OFF_STATION:OFF_ORDERS] = self._target(sx, sy, L.station_dist[self.cell], L.station_move[self.cell])
        d, move, shelf = self._order_dist()
        near = np.argsort(d, axis=2, kind="stable")[..., :N_NEAR]
        nd = np.take_along_axis(d, near, axis=2)
        ox, oy = L.xy(L.shelves[np.take_along_axis(np.broadcast_to(shelf[:, None, :], d.shape), near, axis=2)])
        feats = self._target(ox, oy, nd, np.take_along_axis(move, near, axis=2))
        ok = (nd < FAR)[..., None]
        orders = np.concatenate([np.where(ok, feats, 0.0), ok], axis=-1)
        out[..., OFF_ORDERS:OFF_LOCAL] = orders.reshape(E, U, 6 * N_NEAR)
        ring = L.ring[self.cell]                                                # [E, U, 8]
        occupied = np.zeros((E, L.cells + 1), bool)
        occupied[np.arange(E)[:, None], self.cell] = True
        out[..., OFF_LOCAL:OFF_LOCAL + 8] = self._wall[ring]
        out[..., OFF_LOCAL + 8:] = occupied[np.arange(E)[:, None, None], ring]
        return out

    def goal_features(self, zones: np.ndarray) -> np.ndarray:
        """Robots' grounded goals [E, U, 6] for goal zones [E, U]: see scenarios/warehouse.py."""
        L, U = self.layout, self.n_robots
        d, move, shelf = self._order_dist()
        idle = (self.alive & ~self.carrying)[:, :, None]
        d = np.where(idle & (self.slot_zone[None, None, :] == zones[:, :, None]), d, FAR)
        owner = d.argmin(axis=1)                                               # [E, Q] nearest robot
        own = (d < FAR) & (owner[:, None, :] == np.arange(U)[None, :, None])
        q = np.where(own.any(axis=2), np.where(own, d, FAR).argmin(axis=2), d.argmin(axis=2))
        has_order = np.asarray((d < FAR).any(axis=2))
        take = lambda arr: np.take_along_axis(arr, q[..., None], axis=2)[..., 0]   # noqa: E731
        ox, oy = L.xy(L.shelves[take(np.broadcast_to(shelf[:, None, :], d.shape))])
        order = self._target(ox, oy, take(d), take(move))
        sx, sy = L.xy(L.station_of[self.cell])
        station = self._target(sx, sy, L.station_dist[self.cell], L.station_move[self.cell])
        home = L.zone_home[np.clip(zones, 0, N_ZONES - 1)]
        hx, hy = L.xy(home)
        rest = self._target(hx, hy, L.dist[home, self.cell], L.move[home, self.cell])
        task = self.carrying | has_order
        feats = np.where(self.carrying[..., None], station, np.where(has_order[..., None], order, rest))
        return np.concatenate([feats, task[..., None]], axis=-1).astype(np.float32)

    def state(self) -> np.ndarray:
        """[E, 3U + 4Q + 1]: robot x, y, carrying; per slot shelf x, y, valid, age; time fraction."""
        L, cfg = self.layout, self.cfg
        x, y = L.xy(self.cell)
        valid = self.slot_shelf >= 0
        sx, sy = L.xy(L.shelves[np.where(valid, self.slot_shelf, 0)])
        age = np.where(valid, (self.t[:, None] - self.slot_t) / cfg.max_steps, 0.0)
        parts = [x / (L.width - 1), y / (L.height - 1), self.carrying, np.where(valid, sx / (L.width - 1), 0),
                 np.where(valid, sy / (L.height - 1), 0), valid, np.clip(age, 0, 1), (self.t / cfg.max_steps)[:, None]]
        return np.concatenate(parts, axis=1).astype(np.float32)

    def positions(self) -> np.ndarray:
        """Robot cells [E, U, 2] as (x, y)."""
        x, y = self.layout.xy(self.cell)
        return np.stack([x, y], axis=-1)

    def episode_info(self, env_index: int) -> dict[str, float]:
        e = env_index
        orders, deliveries = int(self.orders[e]), int(self.deliveries[e])
        return {"delivery_rate": deliveries / max(orders, 1), "deliveries": float(deliveries),
                "orders": float(orders), "rejected": float(self.rejected[e])}
