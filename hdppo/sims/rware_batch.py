"""RWARE 2.0 natively: `RwareBatch` steps E warehouses as numpy arrays, equal to rware's `Warehouse`
(`rware-{size}-{N}ag[-hard]-v2`, as hdppo's PettingZoo adapter reports it) for the same seeds and actions.

Copy e draws from its own Generator (`copy_rngs`: seed + e), the numbers rware draws with
`reset(seed=seed + e)`: the robots' cells and facings and the request queue at a reset, a
replacement request per delivery. Per step: the moves of every copy are resolved at once
(`rware_moves.commit`); only resets and deliveries loop over copies.

Units `robot_0` ... `robot_{N-1}`, actions Discrete(5) (0 no-op, 1 forward, 2 left, 3 right,
4 load / unload), +1 to the robot that brings a requested shelf onto a delivery cell. Observation
(rware's flattened one, sensor range 1, 71 numbers): x, y, carrying, facing one-hot, on a highway;
per cell of the 3 x 3 around the robot (row by row): a robot there, its facing one-hot ([1, 0, 0, 0]
without one), a shelf there, that shelf requested. Episodes end after 500 steps, every robot
truncated (rware's done at its own step limit, which the adapter reports as a truncation).

State, for a scenario's hooks (arrays over copies, updated in place; ids 0-based: rware's minus one):

- `x`, `y`, `dir` [E, U] int64: each robot's cell and facing (0 up, 1 down, 2 left, 3 right);
- `carrying` [E, U] int64: the shelf each robot carries, -1 if none;
- `shelf_x`, `shelf_y` [E, S] int64: each shelf's cell (a carried shelf's is its robot's);
- `queue` [E, Q] int64: the requested shelves in queue order; `requested` [E, S] bool: the same as flags;
- `agent_at`, `shelf_at` [E, H, W] int64: the robot / shelf in each cell, -1 if none;
- `before`: `x`, `y`, `carrying`, `requested` as they were before the last step (`before.valid` [E]
  False until a copy's first step after its reset);
- `t` [E]: the episode's step; `deliveries` [E]: requested shelves delivered this episode;
  `lifts` [E]: requested shelves lifted this episode (a shelf set down and lifted again counts again);
- `picked` [E, S] bool: flags a scenario keeps per shelf, cleared at each reset (the rware
  scenario's: requested shelves whose first pick its shaping rewarded);
- `highways` [H, W] bool, `goals` [G, 2] (x, y) delivery cells, `grid_size` (H, W) and `layout`.
"""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import EnvStep, NumpyBatch, copy_rngs
from hdppo.sims.rware_layout import MAX_STEPS, Layout, layout
from hdppo.sims.rware_moves import commit

NOOP, FORWARD, LEFT, RIGHT, LOAD = range(5)
DX = np.array([0, 0, -1, 1])                   # per facing: up, down, left, right
DY = np.array([-1, 1, 0, 0])
TURN = np.array([[0, 1, 2, 3], [0, 1, 2, 3], [2, 3, 1, 0], [3, 2, 0, 1], [0, 1, 2, 3]])   # [action, facing]
EYE = np.eye(4, dtype=np.float32)
OBS_DIM = 8 + 9 * 7
# a robot's own features after x, y, [carrying, facing one-hot, on a highway], by carrying * 8 + facing * 2 + highway
SELF = np.array([[c, *EYE[f], h] for c in (0, 1) for f in range(4) for h in (0, 1)], np.float32)
# a sensed cell's 7 numbers, by (1 + facing of its robot, 0 without) * 3 + (0 no shelf, 1 a shelf, 2 requested)
SENSE = np.array([[r > 0, *EYE[max(r - 1, 0)], s > 0, s == 2] for r in range(5) for s in range(3)], np.float32)


@dataclass
class Before:
    """The robots' cells, carried shelves and the requested flags before the last step, [E, ...];
    `valid` [E] is False in a copy not stepped since its reset."""

    x: np.ndarray
    y: np.ndarray
    carrying: np.ndarray
    requested: np.ndarray
    valid: np.ndarray


class RwareBatch(NumpyBatch):
    """E rware warehouses of one size; see the module docstring. A subclass that appends features of
    its own to each robot's observation sets `obs_extra` (their count) and extends `_observe`."""

    obs_extra = 0

    def __init__(self, size: str = "tiny-2ag", hard: bool = False, n_envs: int = 1, seed: int | None = None) -> None:
        self.layout: Layout = layout(size, hard)
        L = self.layout
        self.n_envs = E = int(n_envs)
        if E < 1:
            raise ScenarioError(f"RwareBatch(n_envs={n_envs})", "pass n_envs >= 1")
        U, S, Q = L.n_agents, L.n_shelves, L.queue_size
        H, W = self.grid_size = L.grid_size
        self.units = [f"robot_{i}" for i in range(U)]
        self.obs_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM + self.obs_extra,), np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.action_mask = None
        self.highways, self.goals = L.highways, L.goals
        self.x = np.zeros((E, U), np.int64)
        self.y = np.zeros((E, U), np.int64)
        self.dir = np.zeros((E, U), np.int64)
        self.carrying = np.full((E, U), -1, np.int64)
        self.shelf_x = np.zeros((E, S), np.int64)
        self.shelf_y = np.zeros((E, S), np.int64)
        self.queue = np.zeros((E, Q), np.int64)
        self._req = np.zeros((E, S + 1), bool)          # a last column always False, read for shelf -1
        self.requested = self._req[:, :S]
        self.t = np.zeros(E, np.int64)
        self.deliveries = np.zeros(E, np.float64)
        self.lifts = np.zeros(E, np.float64)
        self.picked = np.zeros((E, S), bool)
        self.before = Before(self.x.copy(), self.y.copy(), self.carrying.copy(), self.requested.copy(),
                             np.zeros(E, bool))
        self.obs = np.zeros((E, U, OBS_DIM + self.obs_extra), np.float32)
        self.alive = np.zeros((E, U), bool)
        # the grids are padded by one cell of -1 (off the map), flat: cell (x, y) is (y + 1) * (W + 2) + x + 1
        self._wp = W + 2
        self._agent_at = np.full((E, (H + 2) * self._wp), -1, np.int64)
        self._shelf_at = np.full((E, (H + 2) * self._wp), -1, np.int64)
        self._highway = np.zeros((H + 2) * self._wp, bool)
        self._highway[self._cell(*np.nonzero(L.highways.T))] = True
        yy, xx = np.divmod(np.arange((H + 2) * self._wp), self._wp)
        self._cell_xy = np.stack([xx - 1, yy - 1], axis=1)
        self._window = (np.arange(-1, 2)[:, None] * self._wp + np.arange(-1, 2)[None, :]).reshape(-1)
        self._goal_cells = self._cell(L.goals[:, 0], L.goals[:, 1])
        # the cell ahead of each cell per facing, the wall kept (rware clamps a forward move to the map)
        ax = np.clip(self._cell_xy[:, :1] + DX, 0, W - 1)
        ay = np.clip(self._cell_xy[:, 1:] + DY, 0, H - 1)
        self._ahead = self._cell(ax, ay)
        self._off = np.arange(E)[:, None] * ((H + 2) * self._wp)
        self._rows, self._uoff, self._robot = np.arange(E)[:, None], np.arange(E)[:, None] * U, np.arange(U)
        self._pos = np.zeros((E, U), np.int64)
        self._rng = copy_rngs(seed, E)
        self.reset_done(np.ones(E, bool))

    # ---- views -------------------------------------------------------------------------------
    def _cell(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y) + 1) * self._wp + np.asarray(x) + 1

    @property
    def agent_at(self) -> np.ndarray:
        """[E, H, W]: the robot in each cell, -1 if none."""
        H, W = self.grid_size
        return self._agent_at.reshape(self.n_envs, H + 2, W + 2)[:, 1:-1, 1:-1]

    @property
    def shelf_at(self) -> np.ndarray:
        """[E, H, W]: the shelf in each cell, -1 if none."""
        H, W = self.grid_size
        return self._shelf_at.reshape(self.n_envs, H + 2, W + 2)[:, 1:-1, 1:-1]

    # ---- episodes ----------------------------------------------------------------------------
    def reset_done(self, mask: np.ndarray) -> None:
        envs = np.flatnonzero(mask)
        if len(envs) == 0:
            return
        L = self.layout
        H, W = self.grid_size
        U, S, Q = L.n_agents, L.n_shelves, L.queue_size
        for e in envs.tolist():        # rware's draws, in its order: cells, facings, requests
            rng = self._rng[e]
            cells = rng.choice(H * W, size=U, replace=False)
            self.y[e], self.x[e] = np.divmod(cells, W)
            self.dir[e] = rng.choice(4, size=U)
            self.queue[e] = rng.choice(S, size=Q, replace=False)
        self.carrying[envs] = -1
        self.shelf_x[envs], self.shelf_y[envs] = L.shelf_cells[:, 0], L.shelf_cells[:, 1]
        self.requested[envs] = False
        self.requested[envs[:, None], self.queue[envs]] = True
        self.t[envs] = 0
        self.deliveries[envs] = 0.0
        self.lifts[envs] = 0.0
        self.picked[envs] = False
        self.before.valid[envs] = False
        self.alive[envs] = True
        self._pos = self._cell(self.x, self.y)
        rows = np.arange(self.n_envs)[:, None]
        self._agent_at[envs] = -1
        self._agent_at[rows, self._pos] = np.arange(U)
        self._shelf_at[envs] = -1
        self._shelf_at[rows, self._cell(self.shelf_x, self.shelf_y)] = np.arange(S)
        self.obs[envs] = self._observe()[envs]

    # ---- stepping ----------------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> EnvStep:
        a = np.asarray(actions).astype(np.int64, copy=False)
        if a.shape != self.alive.shape or a.min() < 0 or a.max() > 4:
            raise ScenarioError(f"RwareBatch.step got actions of shape {a.shape} (values {a.min()}..{a.max()})",
                                f"pass one action in 0..4 per robot and copy, shape {self.alive.shape}")
        E, U = a.shape
        pos, carry = self._pos, self.carrying
        loaded = carry >= 0
        was_alive = self.alive.copy()
        self.before = Before(self.x.copy(), self.y.copy(), carry.copy(), self.requested.copy(), np.ones(E, bool))
        fwd = a == FORWARD
        target = np.where(fwd, self._ahead[pos, self.dir], pos)
        # a loaded robot cannot drive into a standing shelf (one a loaded robot stands under may leave)
        off, agents, shelves = self._off, self._agent_at.reshape(-1), self._shelf_at.reshape(-1)
        other = agents[target + off]
        other_loaded = (other >= 0) & loaded.reshape(-1)[np.maximum(other, 0) + self._uoff]
        refused = loaded & (target != pos) & (shelves[target + off] >= 0) & ~other_loaded
        target = np.where(refused, pos, target)
        moved = fwd & (target != pos) & commit(pos, target, other, self._cell_xy)
        new = np.where(moved, target, pos)
        under = shelves[pos + off]                         # what a loader lifts: the shelf above it
        lift = (a == LOAD) & ~loaded & (under >= 0)
        drop = (a == LOAD) & loaded & ~self._highway[pos]
        agents[pos + off] = -1                             # cells are one robot's before and after
        agents[new + off] = self._robot
        ce, cu = np.nonzero(moved & loaded)
        if len(ce):
            shelf = carry[ce, cu]
            self._shelf_at[ce, pos[ce, cu]] = -1
            self._shelf_at[ce, new[ce, cu]] = shelf
            self.shelf_x[ce, shelf], self.shelf_y[ce, shelf] = self._cell_xy[new[ce, cu]].T
        self._pos = new
        self.x[:], self.y[:] = self._cell_xy[new, 0], self._cell_xy[new, 1]
        self.dir[:] = TURN[a, self.dir]
        self.carrying[:] = np.where(lift, under, np.where(drop, -1, carry))
        self.lifts += (lift & self._req[self._rows, under]).sum(axis=1)      # under -1: the False column
        rewards = np.zeros((E, U), np.float32)
        at_goal = self._shelf_at[:, self._goal_cells]
        hit = (at_goal >= 0) & self._req[self._rows, at_goal]
        if hit.any():
            for e in np.flatnonzero(hit.any(axis=1)).tolist():
                self._deliver(e, rewards[e])
            self.deliveries += rewards.sum(axis=1)
        self.t += 1
        rewards *= was_alive
        truncated = (self.t >= MAX_STEPS)[:, None] & was_alive
        self.alive &= ~truncated
        self.obs[:] = self._observe()
        done = np.asarray(~self.alive.any(axis=1))
        return EnvStep(rewards, np.zeros_like(truncated), truncated, done)

    def _deliver(self, e: int, rewards: np.ndarray) -> None:
        """Copy e's deliveries, goal by goal as rware makes them: each requested shelf on a delivery
        cell is replaced in the queue by a random shelf not requested, and its robot earns +1."""
        for cell in self._goal_cells.tolist():
            s = int(self._shelf_at[e, cell])
            if s < 0 or not self.requested[e, s]:
                continue
            free = np.flatnonzero(~self.requested[e])
            new = free[self._rng[e].choice(len(free))]
            self.queue[e, self.queue[e] == s] = new
            self.requested[e, s], self.requested[e, new] = False, True
            rewards[self._agent_at[e, cell]] += 1.0

    def _observe(self) -> np.ndarray:
        """Every robot's observation [E, U, 71] from the current state, through per-cell codes:
        (1 + the facing of the robot there, 0 if none) * 3 + (a shelf there, 2 if requested)."""
        E, U = self.x.shape
        shelves = self._shelf_at
        code = np.where(shelves >= 0, 1, 0) + self._req[self._rows, shelves]     # shelf -1 reads False
        code.reshape(-1)[self._pos + self._off] += 3 * (1 + self.dir)
        out = np.empty((E, U, OBS_DIM), np.float32)
        out[..., 0], out[..., 1] = self.x, self.y
        out[..., 2:8] = SELF[(self.carrying >= 0) * 8 + self.dir * 2 + self._highway[self._pos]]
        cells = self._pos[:, :, None] + (self._window + self._off[:, :, None])
        out[..., 8:] = SENSE[code.reshape(-1)[cells]].reshape(E, U, -1)
        return out

    def episode_info(self, env_index: int) -> dict[str, float]:
        """The ended episode's `deliveries` (requested shelves delivered) and `lifts` (requested shelves
        lifted, again after a set-down too), read before the copy's reset."""
        return {"deliveries": float(self.deliveries[env_index]), "lifts": float(self.lifts[env_index])}
