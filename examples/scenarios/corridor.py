"""corridor: a native numpy scenario; units visit target cells of a 1-D corridor; cell 0 is a pit.

Shows `batched_env`: `CorridorBatch` steps all copies at once with numpy (no loop over copies or
units), and `OneCopy` is the one-copy PettingZoo view `env(cfg)` must still return.
Actions: 0 stay, 1 left, 2 right. Stepping on an unvisited target gives +1 (the lowest unit
index wins ties), every living unit pays `step_cost`, a unit on cell 0 dies. The episode ends
when every target is visited (terminated) or after `max_steps` (truncated).
Two layers: a commander gives each unit a target, grounded as [signed distance, visited flag].

    hdppo check examples/scenarios/corridor.py
    hdppo check examples/scenarios/corridor.py length=40 n_units=8 n_targets=6 max_steps=80
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from hdppo import AgentGraph, BatchedEnv, EnvStep, Layer, LayerContext, Scenario, ScenarioConfig


@dataclass
class CorridorConfig(ScenarioConfig):
    length: int = 12
    n_units: int = 3
    n_targets: int = 3
    max_steps: int = 30
    step_cost: float = 0.01


class CorridorBatch(BatchedEnv):
    def __init__(self, cfg: CorridorConfig, n_envs: int, seed: int | None = None) -> None:
        self.cfg, self.n_envs = cfg, n_envs
        U, T = cfg.n_units, cfg.n_targets
        self.units = [f"unit_{i}" for i in range(U)]
        # obs: position (1), per target: signed distance (1) and visited flag (1), time fraction (1)
        low = np.concatenate([[0.0], -np.ones(T), np.zeros(T + 1)]).astype(np.float32)
        self.obs_space = spaces.Box(low, np.ones(2 * T + 2, np.float32), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.obs = np.zeros((n_envs, U, 2 * T + 2), np.float32)
        self.alive = np.zeros((n_envs, U), bool)
        self.pos = np.zeros((n_envs, U), np.int64)
        self.target = np.zeros((n_envs, T), np.int64)
        self.visited = np.zeros((n_envs, T), bool)
        self.t = np.zeros(n_envs, np.int64)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None or not hasattr(self, "rng"):
            self.rng = [np.random.default_rng(None if seed is None else seed + e) for e in range(self.n_envs)]
        self.reset_done(np.ones(self.n_envs, bool))

    def reset_done(self, mask: np.ndarray) -> None:
        cfg = self.cfg
        for e in np.flatnonzero(mask):       # episode starts may loop; steps may not
            cells = 1 + self.rng[e].permutation(cfg.length - 1)          # never start on the pit
            self.target[e] = cells[:cfg.n_targets]
            self.pos[e] = self.rng[e].integers(1, cfg.length, cfg.n_units)
        self.visited[mask], self.alive[mask], self.t[mask] = False, True, 0
        self.obs[mask] = self._observe()[mask]

    def _observe(self) -> np.ndarray:
        scale = float(self.cfg.length - 1)
        dist = (self.target[:, None, :] - self.pos[:, :, None]) / scale                  # [E, U, T]
        flags = np.broadcast_to(self.visited[:, None, :], dist.shape)
        time = np.broadcast_to((self.t / self.cfg.max_steps)[:, None, None], dist.shape[:2] + (1,))
        return np.concatenate([self.pos[..., None] / scale, dist, flags, time], axis=2).astype(np.float32)

    def step(self, actions: np.ndarray) -> EnvStep:
        live = self.alive.copy()
        a = np.asarray(actions)
        move = np.where(live, np.select([a == 1, a == 2], [-1, 1], 0), 0)      # stay, left, right
        self.pos = np.clip(self.pos + move, 0, self.cfg.length - 1)
        on = live[:, :, None] & ~self.visited[:, None, :] & (self.pos[:, :, None] == self.target[:, None, :])
        first = on & (np.cumsum(on, axis=1) == 1)                         # lowest unit index per target
        rewards = np.where(live, first.sum(axis=2) - self.cfg.step_cost, 0.0).astype(np.float32)
        self.visited |= on.any(axis=1)
        self.t += 1
        terminated = live & ((self.pos == 0) | np.all(self.visited, axis=1, keepdims=True))
        truncated = live & ~terminated & (self.t >= self.cfg.max_steps)[:, None]
        self.alive = live & ~terminated & ~truncated
        self.obs = np.where(live[..., None], self._observe(), self.obs)  # the dead keep their last obs
        return EnvStep(rewards, terminated, truncated, ~np.any(self.alive, axis=1))

    def episode_info(self, e: int) -> dict[str, float]:
        return {"visited": float(self.visited[e].mean())}


class OneCopy(ParallelEnv):
    """The PettingZoo view of one copy of a BatchedEnv (what `env(cfg)` returns)."""

    metadata = {"name": "corridor_v0", "render_modes": []}

    def __init__(self, batch: BatchedEnv) -> None:
        self.batch, self.render_mode = batch, None
        self.possible_agents: list[Any] = list(batch.units)
        self.agents: list[Any] = []

    def observation_space(self, agent):
        return self.batch.obs_space

    def action_space(self, agent):
        return self.batch.action_space

    def reset(self, seed=None, options=None):
        self.batch.reset(seed)
        self.agents = list(self.possible_agents)
        return {a: self.batch.obs[0, i].copy() for i, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(self, actions):
        idx = [self.possible_agents.index(a) for a in self.agents]
        act = np.zeros((1, len(self.possible_agents)), np.int64)
        for a, x in actions.items():
            act[0, self.possible_agents.index(a)] = x
        res = self.batch.step(act)
        columns: tuple[list[Any], ...] = (
            [self.batch.obs[0, i].copy() for i in idx], [float(res.rewards[0, i]) for i in idx],
            [bool(res.terminated[0, i]) for i in idx], [bool(res.truncated[0, i]) for i in idx], [{} for _ in idx])
        out = [dict(zip(self.agents, vals)) for vals in columns]
        self.agents = [a for a, i in zip(self.agents, idx) if self.batch.alive[0, i]]
        return tuple(out)


def make_layers(cfg: CorridorConfig) -> list[Layer]:
    T = cfg.n_targets

    def to_target(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        f = ctx.features                                                  # [E, U, 2T + 2]
        dist = np.take_along_axis(f[..., 1:1 + T], goals[..., None], axis=2)
        flag = np.take_along_axis(f[..., 1 + T:1 + 2 * T], goals[..., None], axis=2)
        return np.concatenate([dist, flag], axis=2)                       # [E, U, 2]

    return [
        Layer("high", interval=4, goal_space=spaces.Discrete(T), goal_features=to_target,
              goal_features_space=spaces.Box(np.array([-1, 0], np.float32), np.ones(2, np.float32)),
              goal_success=lambda ctx: ctx.goal_features[..., 1] > 0.5),
        Layer("low", intrinsic=lambda ctx: -np.abs(ctx.goal_features[..., 0]) * (ctx.goal_features[..., 1] < 0.5),
              w_int=0.1),
    ]


SCENARIO = Scenario(
    name="corridor",
    description="Native numpy corridor: a commander sends units to target cells; a pit kills",
    env=lambda cfg: OneCopy(CorridorBatch(cfg, 1)),
    graph=lambda cfg, agents: AgentGraph.groups(agents, layers=("high", "low")),
    layers=make_layers, config=CorridorConfig,
    batched_env=lambda cfg, n_envs, seed: CorridorBatch(cfg, n_envs, seed))
