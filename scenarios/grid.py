"""grid: units claim targets on a small grid; numpy over all copies; the scenario the tests use.

Cells are (x, y) with x the column and y the row, 0 <= x, y < size. Actions: 0 stay, 1 up (y-1),
2 down (y+1), 3 left (x-1), 4 right (x+1), clipped at the walls; units may share cells. A unit that
steps onto an unclaimed target claims it (+1; on a tie the lowest unit index wins), a unit that steps
onto a hazard dies. Each living unit pays `step_penalty` per step. The optimal behaviour is known:
walk the L1 path to an unclaimed target (`greedy_low` does that toward the unit's goal target).

Unit observation (float32): own position / (size-1) (2), per target the vector target - unit /
(size-1) (2 * n_targets), claimed flags (n_targets), time fraction t / max_steps (1).

Goals: `high` picks a target per squad, `mid` a target per unit (both Discrete(n_targets), per_child).
A goal is grounded as [vector to the target (2), its claimed flag (1)], from the unit's observation
(a squad's vector is from the centroid of its living units: the mean part of its default features).
Low intrinsic reward (weight w_int.low, default 0.1): +1 on the step the unit claims its goal
target, 0 once the goal target is claimed (goal over), else -0.1 * L1 distance / 2 (in [-0.1, 0]).
The +1 reads `GridBatch.last_claim`; under another BatchedEnv only the shaping term is given.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from hdppo import AgentGraph, EnvStep, Layer, LayerContext, NumpyBatch, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import BatchParallelEnv, copy_rngs

if TYPE_CHECKING:
    from hdppo.sims import Scene

DX = np.array([0, 0, 0, -1, 1], dtype=np.int64)
DY = np.array([0, -1, 1, 0, 0], dtype=np.int64)
GOAL_BOX = gym.spaces.Box(np.array([-1, -1, 0], np.float32), np.array([1, 1, 1], np.float32), dtype=np.float32)


@dataclass
class GridConfig(ScenarioConfig):
    """Grid world config; `layers` is the hierarchy depth (1 flat, 2 commander/units, 3 with squads)."""

    size: int = 7
    n_units: int = 4
    squad_size: int = 2
    layers: int = 3
    n_targets: int = 4
    max_steps: int = 30
    hazards: int = 0
    step_penalty: float = 0.01


def check_config(cfg: GridConfig) -> None:
    """Raise ScenarioError for a config the grid cannot build."""
    def bad(problem: str, fix: str) -> None:
        raise ScenarioError(problem, fix, where="scenario 'grid'")
    if cfg.size < 2:
        bad(f"size={cfg.size} is too small", "use size >= 2")
    if cfg.n_units < 1 or cfg.n_targets < 1 or cfg.squad_size < 1 or cfg.max_steps < 1 or cfg.hazards < 0:
        bad("n_units, n_targets, squad_size and max_steps must be >= 1 and hazards >= 0", "fix those values")
    if cfg.layers not in (1, 2, 3):
        bad(f"layers={cfg.layers} is not a supported depth", "use layers=1, 2 or 3")
    need = cfg.n_targets + cfg.hazards + cfg.n_units
    if need > cfg.size * cfg.size:
        bad(f"{need} distinct cells (targets + hazards + unit starts) do not fit a {cfg.size}x{cfg.size} grid",
            "raise size or lower n_targets / hazards / n_units")


class GridBatch(NumpyBatch):
    """E copies of the grid as arrays [E, ...]; `step` has no Python loop over copies or units."""

    def __init__(self, cfg: GridConfig, n_envs: int = 1, seed: int | None = None) -> None:
        check_config(cfg)
        self.cfg = cfg
        self.n_envs = E = int(n_envs)
        U, T, H, s = cfg.n_units, cfg.n_targets, cfg.hazards, cfg.size
        self.units = [f"unit_{i}" for i in range(U)]
        self.obs_dim = 3 + 3 * T
        low = np.concatenate([np.zeros(2), -np.ones(2 * T), np.zeros(T + 1)]).astype(np.float32)
        self.obs_space = gym.spaces.Box(low, np.ones(self.obs_dim, np.float32), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.state_space = gym.spaces.Box(0.0, 1.0, (3 * U + 3 * T + 1,), np.float32)
        self.action_mask = None
        self.x = np.zeros((E, U), np.int64)
        self.y = np.zeros((E, U), np.int64)
        self.tx = np.zeros((E, T), np.int64)
        self.ty = np.zeros((E, T), np.int64)
        self.hx = np.zeros((E, H), np.int64)
        self.hy = np.zeros((E, H), np.int64)
        self.claimed = np.zeros((E, T), bool)
        self.alive = np.zeros((E, U), bool)
        self.t = np.zeros(E, np.int64)
        self.last_claim = np.full((E, U), -1, np.int64)   # target claimed by each unit at the last step
        self.obs = np.zeros((E, U, self.obs_dim), np.float32)
        self._cells = s * s
        self._rng = copy_rngs(seed, E)
        self.reset_done(np.ones(E, bool))

    # ---- episodes --------------------------------------------------------------------------
    def reset_done(self, mask: np.ndarray) -> None:
        envs = np.flatnonzero(mask)
        if len(envs) == 0:
            return
        cfg = self.cfg
        T, H = cfg.n_targets, cfg.hazards
        k = T + H + cfg.n_units
        cells = np.stack([self._rng[e].permutation(self._cells)[:k] for e in envs])   # [n, k] distinct
        cx, cy = cells % cfg.size, cells // cfg.size
        self.tx[envs], self.ty[envs] = cx[:, :T], cy[:, :T]
        self.hx[envs], self.hy[envs] = cx[:, T:T + H], cy[:, T:T + H]
        self.x[envs], self.y[envs] = cx[:, T + H:], cy[:, T + H:]
        self._start(envs)

    def _start(self, envs: np.ndarray) -> None:
        self.claimed[envs] = False
        self.alive[envs] = True
        self.t[envs] = 0
        self.last_claim[envs] = -1
        self.obs[envs] = self._observe()[envs]

    def place(self, e: int, units: Sequence[tuple[int, int]], targets: Sequence[tuple[int, int]],
              hazards: Sequence[tuple[int, int]] = ()) -> None:
        """Start copy e's episode from hand-given (x, y) cells (tests, demos); counts must match cfg."""
        u, t, h = (np.asarray(c, np.int64).reshape(-1, 2) for c in (units, targets, hazards))
        if (len(u), len(t), len(h)) != (self.cfg.n_units, self.cfg.n_targets, self.cfg.hazards):
            raise ValueError("place() needs n_units unit cells, n_targets target cells and `hazards` hazard cells")
        self.x[e], self.y[e] = u[:, 0], u[:, 1]
        self.tx[e], self.ty[e] = t[:, 0], t[:, 1]
        self.hx[e], self.hy[e] = h[:, 0], h[:, 1]
        self._start(np.array([e]))

    # ---- stepping --------------------------------------------------------------------------
    def _observe(self) -> np.ndarray:
        """Fresh observations of every unit [E, U, D] from the current state."""
        cfg, E, U = self.cfg, self.n_envs, self.cfg.n_units
        T, s = cfg.n_targets, float(cfg.size - 1)
        out = np.empty((E, U, self.obs_dim), np.float32)
        out[..., 0] = self.x / s
        out[..., 1] = self.y / s
        rel = np.stack([self.tx[:, None, :] - self.x[:, :, None], self.ty[:, None, :] - self.y[:, :, None]], axis=-1)
        out[..., 2:2 + 2 * T] = (rel / s).reshape(E, U, 2 * T)
        out[..., 2 + 2 * T:2 + 3 * T] = self.claimed[:, None, :]
        out[..., -1] = (self.t / cfg.max_steps)[:, None]
        return out

    def step(self, actions: np.ndarray) -> EnvStep:
        cfg = self.cfg
        a = np.asarray(actions).astype(np.int64, copy=False)
        if a.shape != self.alive.shape:
            raise ValueError(f"actions have shape {a.shape}, expected {self.alive.shape}")
        live = self.alive.copy()
        if (live & ((a < 0) | (a > 4))).any():
            raise ValueError("grid actions are 0..4 (stay, up, down, left, right)")
        a = np.where(live, a, 0)
        self.x = np.clip(self.x + DX[a], 0, cfg.size - 1)
        self.y = np.clip(self.y + DY[a], 0, cfg.size - 1)
        # claims: of the living units on an unclaimed target, the lowest index takes it
        on = (live[:, :, None] & ~self.claimed[:, None, :]
              & (self.x[:, :, None] == self.tx[:, None, :]) & (self.y[:, :, None] == self.ty[:, None, :]))
        first = on.argmax(axis=1)                                                     # [E, T]
        win = on & (np.arange(cfg.n_units)[None, :, None] == first[:, None, :])       # [E, U, T]
        claims = win.any(axis=2)
        self.last_claim = np.where(claims, win.argmax(axis=2), -1)
        self.claimed |= on.any(axis=1)
        rewards = np.where(live, claims.astype(np.float32) - np.float32(cfg.step_penalty), 0.0).astype(np.float32)
        hit = live & ((self.x[:, :, None] == self.hx[:, None, :]) & (self.y[:, :, None] == self.hy[:, None, :])).any(2)
        self.t += live.any(axis=1)
        terminated = hit | (live & np.asarray(self.claimed.all(axis=1))[:, None])
        still = live & ~terminated
        truncated = still & (self.t >= cfg.max_steps)[:, None]
        self.alive = still & ~truncated
        self.obs = np.where(live[:, :, None], self._observe(), self.obs)
        return EnvStep(rewards, terminated, truncated, np.asarray(~self.alive.any(axis=1)))

    def state(self) -> np.ndarray:
        cfg = self.cfg
        s = float(cfg.size - 1)
        parts = [self.x / s, self.y / s, self.alive, self.tx / s, self.ty / s, self.claimed,
                 (self.t / cfg.max_steps)[:, None]]
        return np.concatenate(parts, axis=1).astype(np.float32)

    def positions(self) -> np.ndarray:
        """Unit cells [E, U, 2] as (x, y)."""
        return np.stack([self.x, self.y], axis=-1)

    def episode_info(self, env_index: int) -> dict[str, float]:
        claimed = self.claimed[env_index]
        return {"targets_claimed": float(claimed.mean()), "success": float(claimed.all())}


class GridParallelEnv(BatchParallelEnv):
    """One grid copy behind PettingZoo's parallel dict API (GridBatch with E=1)."""

    metadata = {"name": "grid_v0", "render_modes": ["rgb_array"]}
    batch: GridBatch

    def __init__(self, cfg: GridConfig | None = None, render_mode: str | None = None) -> None:
        self.cfg = cfg if cfg is not None else GridConfig()
        super().__init__(GridBatch(self.cfg, 1, None), render_mode=render_mode, scene=scene)


def scene(env: GridParallelEnv) -> Scene:
    """Units and targets (orange unclaimed, grey claimed) of the env's copy; hazards as walls."""
    from hdppo.sims import Scene
    b, n = env.batch, float(env.cfg.size)
    targets = np.stack([b.tx[0], b.ty[0]], axis=-1).astype(float)
    hazards = getattr(b, "hx", None)
    walls = None if hazards is None else np.stack([b.hx[0], b.hy[0]], axis=-1).astype(float)
    return Scene((-0.5, n - 0.5, -0.5, n - 0.5), b.positions()[0].astype(float), b.alive[0].copy(),
                 landmarks=targets, landmark_colours=["#aaaaaa" if c else "#ff7f0e" for c in b.claimed[0]],
                 walls=walls)


def goal_xy(env: GridParallelEnv, cfg: Any, layer: str, goals: np.ndarray) -> np.ndarray:
    """A goal is a target index: the target's cell."""
    b = env.batch
    g = np.clip(np.asarray(goals, np.int64), 0, b.tx.shape[1] - 1)
    return np.stack([b.tx[0, g], b.ty[0, g]], axis=-1).astype(float)


# ---- layers: goal grounding, success, intrinsic reward, scripted low -----------------------------
def _ground(unit_feats: np.ndarray, goals: np.ndarray, n_targets: int) -> np.ndarray:
    """[vector to goal target (2), its claimed flag (1)] from unit-observation-shaped features."""
    E, N = goals.shape
    T = n_targets
    g = np.clip(goals.astype(np.int64), 0, T - 1)
    rel = unit_feats[..., 2:2 + 2 * T].reshape(E, N, T, 2)
    vec = np.take_along_axis(rel, g[:, :, None, None], axis=2)[:, :, 0]
    claimed = np.take_along_axis(unit_feats[..., 2 + 2 * T:2 + 3 * T], g[:, :, None], axis=2)
    return np.concatenate([vec, claimed], axis=2).astype(np.float32)


def unit_goal_features(n_targets: int) -> Callable[[np.ndarray, LayerContext], np.ndarray]:
    """Goal grounding for units: ctx.features are the units' observations."""
    def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None                 # every hook but `observe` sees the features
        return _ground(ctx.features, goals, n_targets)
    return ground


def squad_goal_features(n_targets: int) -> Callable[[np.ndarray, LayerContext], np.ndarray]:
    """Goal grounding for squads: the mean part of their default features is the centroid's view."""
    d = 3 + 3 * n_targets

    def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None
        return _ground(ctx.features[..., :d], goals, n_targets)
    return ground


def unit_goal_success(ctx: LayerContext) -> np.ndarray:
    """A unit reached its goal: it stands on the goal target, or that target is claimed."""
    gf = ctx.goal_features
    return ((gf[..., 0] == 0) & (gf[..., 1] == 0)) | (gf[..., 2] > 0.5)


def squad_goal_success(ctx: LayerContext) -> np.ndarray:
    """A squad reached its goal when its goal target is claimed."""
    return ctx.goal_features[..., 2] > 0.5


def low_intrinsic(ctx: LayerContext) -> np.ndarray:
    """+1 on claiming the goal target, 0 once it is claimed, else -0.1 * normalised L1 distance."""
    gf = ctx.goal_features
    r = np.where(gf[..., 2] > 0.5, 0.0, -0.1 * np.abs(gf[..., :2]).sum(axis=-1) / 2.0)
    last = getattr(ctx.env, "last_claim", None)
    if last is not None and ctx.goals is not None:
        r = np.where(last == ctx.goals, 1.0, r)
    return r


def greedy_low(decision: Any) -> np.ndarray:
    """Scripted low policy: one step along the L1 path to the goal target (x first); stay once claimed.

    Reads the last 3 entries of each slot's observation (the grounded goal: vector, claimed flag).
    """
    g = np.asarray(decision.obs)[..., -3:]
    dx, dy, claimed = g[..., 0], g[..., 1], g[..., 2] > 0.5
    act = np.where(dy > 0, 2, np.where(dy < 0, 1, 0))
    act = np.where(dx > 0, 4, np.where(dx < 0, 3, act))
    return np.where(claimed, 0, act).astype(np.int64)


def layers(cfg: GridConfig) -> list[Layer]:
    """high (targets per squad) / mid (targets per unit) / low, cut to cfg.layers from the top."""
    check_config(cfg)
    T = cfg.n_targets
    if cfg.layers == 1:
        return [Layer("low", interval=1)]
    low = Layer("low", interval=1, intrinsic=low_intrinsic, w_int=0.1, scripted=greedy_low)

    def over_units(name: str, interval: int) -> Layer:
        """The layer above the units: a target per unit."""
        return Layer(name, interval=interval, goal_space=gym.spaces.Discrete(T), choice="per_child",
                     goal_features=unit_goal_features(T), goal_features_space=GOAL_BOX, goal_success=unit_goal_success)
    if cfg.layers == 2:
        return [over_units("high", 8), low]
    high = Layer("high", interval=8, goal_space=gym.spaces.Discrete(T), choice="per_child",
                 goal_features=squad_goal_features(T), goal_features_space=GOAL_BOX, goal_success=squad_goal_success)
    return [high, over_units("mid", 4), low]


def graph(cfg: GridConfig, agents: Sequence[str]) -> AgentGraph:
    """Flat, commander over units, or commander / squads of squad_size / units."""
    return AgentGraph.team(list(agents), cfg.layers, cfg.squad_size)


SCENARIO = Scenario(
    name="grid",
    description="Tiny numpy grid: units claim targets (optional hazards); fast, deterministic, optimum known.",
    env=lambda cfg: GridParallelEnv(cfg),
    graph=graph,
    layers=layers,
    config=GridConfig,
    batched_env=lambda cfg, n, seed: GridBatch(cfg, n, seed),
    positions=lambda env: env.positions(),
    scene=scene,
    goal_xy=goal_xy,
)
