"""SkirmishBatch: a StarCraft-micro-like battle vectorised with numpy over env copies and units.

A helper module for `scenarios/skirmish.py` (it defines no SCENARIO): the config, the simulator
and the scripted opponent AI. Everything in `step` is arrays over [E copies, U units, K enemies];
the only Python loops run over env copies at reset (per-copy random streams).

Rules (positions are continuous in [0, size]^2):
- Actions Discrete(9 + K): 0 stop, 1..8 move `speed` along DIRS (E, NE, N, NW, W, SW, S, SE),
  9 + k attack enemy k. Attack k is legal when the unit is alive, its cooldown is 0, and enemy k is
  alive and within the unit's range; an illegal action (or any action of a dead unit) is a stop.
- Attacks are resolved from the positions before the move; an attacker does not move that step and
  its cooldown restarts; damage of both teams lands at once; a unit at hp <= 0 dies.
- Point p is held by a team when a living unit of that team is within `point_radius` of it and no
  living unit of the other team is.
- The game ends when a team is eliminated (the other wins; both at once is a draw) or after
  `max_steps` steps, when the team holding more points wins (equal: draw, no win).
- Rewards (`reward`): `dense` (the default) pays the weighted damage, kill, point and outcome
  terms every step; `outcome` pays only `w_win` on the winning step; `points_end` pays only
  `w_win` x the fraction of the points the team holds on the episode's last step.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

import gymnasium as gym
import numpy as np

from hdppo import EnvStep, NumpyBatch, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import copy_rngs
from hdppo.team.scenario import Choice

_S = np.sqrt(0.5)
DIRS = np.array([[0, 0], [1, 0], [_S, _S], [0, 1], [-_S, _S], [-1, 0], [-_S, -_S], [0, -1], [_S, -_S]])
N_MOVES = 9
REWARDS = ("dense", "outcome", "points_end")     # SkirmishConfig.reward
GOAL_SAMPLERS = ("uniform", "team")             # SkirmishConfig.goal_sampler
UNIT_SHAPINGS = ("distance", "progress")        # SkirmishConfig.unit_shaping
COMMANDERS: tuple[str, ...] = get_args(Choice)  # SkirmishConfig.commander: a Layer's choice


@dataclass
class SkirmishConfig(ScenarioConfig):
    """Skirmish config: team shape, map, opponent difficulty, unit stats and reward weights."""

    layers: int = 3                 # 1 flat units, 2 commander/units, 3 commander/squads/units
    n_squads: int = 3               # squads per team (the opponent mirrors the learning team)
    squad_size: int = 4
    n_melee: int = 2                # melee units per squad; the rest are ranged
    n_points: int = 3
    size: float = 20.0              # arena side
    point_radius: float = 3.0
    max_steps: int = 400
    difficulty: float = 0.4         # 0 easy .. 1 hard (see opponent_params)
    speed: float = 1.0
    melee_hp: float = 1.5
    melee_range: float = 1.5
    melee_damage: float = 0.25
    melee_cooldown: int = 2         # steps after an attack before the next one
    ranged_hp: float = 1.0
    ranged_range: float = 5.0
    ranged_damage: float = 0.2
    ranged_cooldown: int = 3
    w_damage: float = 4.0           # team: x fraction of the enemy team's total HP dealt
    w_taken: float = 2.0            # team: - x fraction of own total HP lost
    w_kill: float = 2.0             # team: x fraction of enemy units killed
    w_point: float = 0.01           # team: x (points held - points the enemy holds) / n_points, per step
    w_win: float = 4.0              # team: +x on a win, -x on a loss
    w_hit: float = 0.2              # own: x damage this unit dealt
    reward: str = "dense"           # dense: the w_* terms every step; outcome: w_win on a win, else 0;
                                    # points_end: w_win x (points held / n_points) on the last step only
    commander: str = "per_child"    # the top layer's choice: per_child, a goal per squad (layers=3) or unit
                                    # (layers=2); broadcast, one goal for its whole team
    goal_sampler: str = "uniform"   # the units' goals while the layer above them is not trained (--skills,
                                    # --layer low): uniform, each unit its own uniform goal; team, one
                                    # uniform goal for the whole team, so the units learn to fight together
    unit_shaping: str = "distance"  # the units' goal reward (their `intrinsic`): distance, minus the distance
                                    # beyond reach every step; progress, paid for closing in, holding a point
                                    # and damage to any enemy in range, no cost for living away from the goal


def check_config(cfg: SkirmishConfig) -> None:
    """Raise ScenarioError for a config the skirmish cannot build."""
    def bad(problem: str, fix: str) -> None:
        raise ScenarioError(problem, fix, where="scenario 'skirmish'")
    if cfg.layers not in (1, 2, 3):
        bad(f"layers={cfg.layers} is not a supported depth", "use layers=1, 2 or 3")
    if min(cfg.n_squads, cfg.squad_size, cfg.n_points, cfg.max_steps) < 1:
        bad("n_squads, squad_size, n_points and max_steps must be >= 1", "fix those values")
    if not 0 <= cfg.n_melee <= cfg.squad_size:
        bad(f"n_melee={cfg.n_melee} does not fit a squad of {cfg.squad_size}", "use 0 <= n_melee <= squad_size")
    if not 0.0 <= cfg.difficulty <= 1.0:
        bad(f"difficulty={cfg.difficulty} is outside [0, 1]", "use 0 (easy) .. 1 (hard), e.g. difficulty=0.5")
    if cfg.reward not in REWARDS:
        bad(f"reward={cfg.reward!r} is not a reward mode", f"use one of {', '.join(REWARDS)}, e.g. reward=outcome")
    if cfg.commander not in COMMANDERS:
        bad(f"commander={cfg.commander!r} is not a choice",
            f"use one of {', '.join(COMMANDERS)}, e.g. commander=broadcast")
    if cfg.goal_sampler not in GOAL_SAMPLERS:
        bad(f"goal_sampler={cfg.goal_sampler!r} is not a goal sampler",
            f"use one of {', '.join(GOAL_SAMPLERS)}, e.g. goal_sampler=team")
    if cfg.unit_shaping not in UNIT_SHAPINGS:
        bad(f"unit_shaping={cfg.unit_shaping!r} is not a unit shaping",
            f"use one of {', '.join(UNIT_SHAPINGS)}, e.g. unit_shaping=progress")
    if cfg.size < 4 or cfg.point_radius <= 0 or cfg.speed <= 0:
        bad("size must be >= 4 and point_radius, speed > 0", "fix those values")
    if min(cfg.melee_hp, cfg.ranged_hp, cfg.melee_range, cfg.ranged_range) <= 0 or \
            min(cfg.melee_damage, cfg.ranged_damage, cfg.melee_cooldown, cfg.ranged_cooldown) < 0:
        bad("unit hp and range must be > 0, damage and cooldown >= 0", "fix the melee_* / ranged_* values")


def opponent_params(difficulty: float) -> dict[str, float]:
    """What difficulty d in [0, 1] changes: HP multiplier, chance to act each step, aggro radius."""
    d = float(difficulty)
    return {"hp_mult": 0.7 + 0.6 * d, "react": 0.5 + 0.5 * d, "aggro": 3.0 + 9.0 * d}


class SkirmishBatch(NumpyBatch):
    """E copies of the skirmish; `step` has no Python loop over copies or units.

    Observation of a unit (all in [-1, 1]; positions / size):
      [0:5]   own x, y, hp / max hp, is_ranged, cooldown / max cooldown
      allies  per learning unit u (index order, self included): rel x, rel y, hp frac (zeros if dead)
      enemies per enemy k: rel x, rel y, hp frac, in my range (zeros if dead)
      points  per point p: rel x, rel y, owner (+1 us, -1 them, 0 nobody)
      [-1]    t / max_steps
    """

    action_mask: np.ndarray             # [E, U, A]: the skirmish always masks actions

    def __init__(self, cfg: SkirmishConfig, n_envs: int = 1, seed: int | None = None) -> None:
        check_config(cfg)
        self.cfg = cfg
        self.n_envs = E = int(n_envs)
        S, Q, P = cfg.n_squads, cfg.squad_size, cfg.n_points
        self.U = self.K = U = K = S * Q
        self.P = P
        ranged = (np.arange(U) % Q) >= cfg.n_melee
        self.ranged = ranged
        self.units = [f"{'ranged' if r else 'melee'}_{i}" for i, r in enumerate(ranged)]

        def pick(melee: float, ranged_: float) -> np.ndarray:
            return np.where(ranged, ranged_, melee).astype(np.float64)
        self.max_hp = pick(cfg.melee_hp, cfg.ranged_hp)
        self.rng2 = pick(cfg.melee_range, cfg.ranged_range) ** 2
        self.dmg = pick(cfg.melee_damage, cfg.ranged_damage)
        self.cd_max = pick(cfg.melee_cooldown, cfg.ranged_cooldown)
        op = opponent_params(cfg.difficulty)
        self.o_max_hp = self.max_hp * op["hp_mult"]
        self.react, self.aggro2 = op["react"], op["aggro"] ** 2
        self.points = np.stack([np.full(P, cfg.size / 2), cfg.size * (2 * np.arange(P) + 1) / (2 * P)], axis=-1)
        lane = np.arange(S) % P
        ang = 2 * np.pi * (np.arange(K) % Q) / Q
        self.guard = self.points[lane[np.arange(K) // Q]] + np.stack([np.cos(ang), np.sin(ang)], -1)
        # observation layout
        self.o_ally, self.o_enemy = 5, 5 + 3 * U
        self.o_point = self.o_enemy + 4 * K
        self.obs_dim = self.o_point + 3 * P + 1
        low = np.zeros(self.obs_dim, np.float32)
        low[self.o_ally:self.o_point] = -1.0
        low[self.o_point:-1] = -1.0
        self.obs_space = gym.spaces.Box(low, np.ones(self.obs_dim, np.float32), dtype=np.float32)
        self.n_actions = N_MOVES + K
        self.action_space = gym.spaces.Discrete(self.n_actions)
        s_low = np.zeros(8 * U + P + 1, np.float32)
        s_low[8 * U:8 * U + P] = -1.0
        self.state_space = gym.spaces.Box(s_low, np.ones_like(s_low), dtype=np.float32)
        # state
        self.pos = np.zeros((E, U, 2))
        self.opos = np.zeros((E, K, 2))
        self.hp = np.zeros((E, U))
        self.ohp = np.zeros((E, K))
        self.cd = np.zeros((E, U))
        self.ocd = np.zeros((E, K))
        self.alive = np.zeros((E, U), bool)
        self.owner = np.zeros((E, P), np.int64)
        self.t = np.zeros(E, np.int64)
        self.noise = np.zeros((E, cfg.max_steps, K), np.float32)   # opponent reaction draws
        self.won = np.zeros(E, bool)
        self.obs = np.zeros((E, U, self.obs_dim), np.float32)
        self.action_mask = np.zeros((E, U, self.n_actions), bool)
        self.last_target = np.full((E, K), -1, np.int64)   # learning unit each enemy attacked last step
        self._rng = copy_rngs(seed, E)
        self.reset_done(np.ones(E, bool))

    # ---- episodes --------------------------------------------------------------------------
    def reset_done(self, mask: np.ndarray) -> None:
        envs = np.flatnonzero(mask)
        if len(envs) == 0:
            return
        cfg, S, Q, P = self.cfg, self.cfg.n_squads, self.cfg.squad_size, self.P
        sz = cfg.size
        for e in envs:
            rng = self._rng[e]
            lanes = self.points[rng.permutation(S) % P, 1]                       # learner squad lanes
            jit = rng.uniform(-1.5, 1.5, size=(2, self.U, 2))
            self.pos[e] = np.stack([np.full(self.U, 0.1 * sz), np.repeat(lanes, Q)], -1) + jit[0]
            self.opos[e] = np.stack([np.full(self.K, 0.9 * sz), np.repeat(self.points[np.arange(S) % P, 1], Q)],
                                    -1) + jit[1]
            self.noise[e] = rng.random((cfg.max_steps, self.K), dtype=np.float32)
        np.clip(self.pos, 0.0, sz, out=self.pos)
        np.clip(self.opos, 0.0, sz, out=self.opos)
        self._start(envs)

    def _start(self, envs: np.ndarray) -> None:
        self.hp[envs] = self.max_hp
        self.ohp[envs] = self.o_max_hp
        self.cd[envs] = 0.0
        self.ocd[envs] = 0.0
        self.alive[envs] = True
        self.t[envs] = 0
        self.won[envs] = False
        self.last_target[envs] = -1
        self.owner[envs] = self._owners()[envs]
        self.obs[envs] = self._observe()[envs]
        self.action_mask[envs] = self._mask()[envs]

    def place(self, e: int, units: Sequence[tuple[float, float]], enemies: Sequence[tuple[float, float]],
              hp: Sequence[float] | None = None, enemy_hp: Sequence[float] | None = None) -> None:
        """Start copy e's episode from hand-given positions (tests, demos); hp <= 0 places a dead unit."""
        u, k = np.asarray(units, float).reshape(-1, 2), np.asarray(enemies, float).reshape(-1, 2)
        if len(u) != self.U or len(k) != self.K:
            raise ValueError(f"place() needs {self.U} unit and {self.K} enemy positions")
        self.pos[e], self.opos[e] = u, k
        self._start(np.array([e]))
        if hp is not None:
            self.hp[e] = np.asarray(hp, float)
        if enemy_hp is not None:
            self.ohp[e] = np.asarray(enemy_hp, float)
        self.alive[e] = self.hp[e] > 0
        self.owner[e] = self._owners()[e]
        self.obs[e] = self._observe()[e]
        self.action_mask[e] = self._mask()[e]

    # ---- derived arrays ----------------------------------------------------------------------
    def _d2(self) -> np.ndarray:
        """Squared distances learner u -> enemy k [E, U, K]."""
        d = self.opos[:, None, :, :] - self.pos[:, :, None, :]
        return d[..., 0] ** 2 + d[..., 1] ** 2

    def _owners(self) -> np.ndarray:
        r2 = self.cfg.point_radius ** 2
        near = lambda p, a: ((((p[:, :, None, :] - self.points) ** 2).sum(-1) <= r2) & a[:, :, None]).any(1)  # noqa
        us, them = near(self.pos, self.hp > 0), near(self.opos, self.ohp > 0)
        return (us & ~them).astype(np.int64) - (them & ~us)

    def _mask(self, d2: np.ndarray | None = None) -> np.ndarray:
        live = self.alive
        d2 = self._d2() if d2 is None else d2
        m = np.zeros((self.n_envs, self.U, self.n_actions), bool)
        m[..., 0] = True
        m[..., 1:N_MOVES] = live[..., None]
        m[..., N_MOVES:] = ((d2 <= self.rng2[None, :, None]) & (self.ohp > 0)[:, None, :]
                            & (live & (self.cd == 0))[..., None])
        return m

    def _observe(self, d2: np.ndarray | None = None) -> np.ndarray:
        E, U, K, P = self.n_envs, self.U, self.K, self.P
        s = self.cfg.size
        out = np.empty((E, U, self.obs_dim), np.float32)
        la, oa = self.hp > 0, self.ohp > 0
        out[..., 0:2] = self.pos / s
        out[..., 2] = np.maximum(self.hp, 0) / self.max_hp
        out[..., 3] = self.ranged
        out[..., 4] = self.cd / np.maximum(self.cd_max, 1)
        a = np.empty((E, U, U, 3))
        a[..., :2] = (self.pos[:, None, :, :] - self.pos[:, :, None, :]) / s
        a[..., 2] = (np.maximum(self.hp, 0) / self.max_hp)[:, None, :]
        a *= la[:, None, :, None]
        out[..., self.o_ally:self.o_enemy] = a.reshape(E, U, 3 * U)
        b = np.empty((E, U, K, 4))
        b[..., :2] = (self.opos[:, None, :, :] - self.pos[:, :, None, :]) / s
        b[..., 2] = (np.maximum(self.ohp, 0) / self.o_max_hp)[:, None, :]
        b[..., 3] = (self._d2() if d2 is None else d2) <= self.rng2[None, :, None]
        b *= oa[:, None, :, None]
        out[..., self.o_enemy:self.o_point] = b.reshape(E, U, 4 * K)
        c = np.empty((E, U, P, 3))
        c[..., :2] = (self.points[None, None] - self.pos[:, :, None, :]) / s
        c[..., 2] = self.owner[:, None, :]
        out[..., self.o_point:-1] = c.reshape(E, U, 3 * P)
        out[..., -1] = (self.t / self.cfg.max_steps)[:, None]
        return out

    # ---- the scripted opponent -----------------------------------------------------------
    def _opponent(self, d2: np.ndarray, running: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each enemy targets its nearest living unit: attacks it in range, chases it inside the aggro
        radius, else walks to its squad's guard spot. With probability 1 - react it idles this step.
        Returns (attack [E, K] bool, target [E, K], move vector [E, K, 2])."""
        cfg = self.cfg
        dd = np.where((self.hp > 0)[:, :, None], d2, np.inf)                    # [E, U, K]
        tgt = dd.argmin(axis=1)                                                  # [E, K]
        dn = np.take_along_axis(dd, tgt[:, None, :], axis=1)[:, 0]               # [E, K]
        t = np.minimum(self.t, cfg.max_steps - 1)
        acts = (self.ohp > 0) & running[:, None] & (self.noise[np.arange(self.n_envs), t] < self.react)
        in_rng = dn <= self.rng2[None, :]
        attack = acts & in_rng & (self.ocd == 0)
        chase = (dn <= self.aggro2) & ~in_rng
        tpos = np.take_along_axis(self.pos, tgt[..., None], axis=1)              # [E, K, 2]
        goal = np.where(chase[..., None], tpos, self.guard[None])
        vec = goal - self.opos
        dist = np.sqrt((vec ** 2).sum(-1))
        step = np.minimum(cfg.speed, dist) / np.maximum(dist, 1e-9)
        move = vec * (step * (acts & ~in_rng & (dist > 0.25)))[..., None]
        return attack, tgt, move

    # ---- stepping --------------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> EnvStep:
        cfg, U, K = self.cfg, self.U, self.K
        a = np.asarray(actions)
        if a.shape != self.alive.shape:
            raise ValueError(f"actions have shape {a.shape}, expected {self.alive.shape}")
        a = a.astype(np.int64, copy=False)
        live = self.alive.copy()
        if (live & ((a < 0) | (a >= self.n_actions))).any():
            raise ValueError(f"skirmish actions are 0..{self.n_actions - 1} (stop, 8 moves, attack enemy k)")
        a = np.where(live, a, 0)
        legal = np.take_along_axis(self.action_mask, a[..., None], axis=2)[..., 0]
        a = np.where(legal, a, 0)
        running = live.any(axis=1)
        d2 = self._d2()
        # attacks, from the positions before the move
        att = a >= N_MOVES
        onehot = (a[..., None] - N_MOVES == np.arange(K)) & att[..., None]           # [E, U, K]
        hit_by_u = att * self.dmg                                                      # [E, U]
        dealt = (onehot * self.dmg[None, :, None]).sum(axis=1)                         # [E, K]
        o_att, o_tgt, o_move = self._opponent(d2, running)
        o_hot = (o_tgt[..., None] == np.arange(U)) & o_att[..., None]                 # [E, K, U]
        taken = (o_hot * self.dmg[None, :, None]).sum(axis=1)                          # [E, U]
        self.last_target = np.where(o_att, o_tgt, -1)
        # moves
        self.pos += DIRS[np.where(att, 0, a)] * cfg.speed
        np.clip(self.pos, 0.0, cfg.size, out=self.pos)
        self.opos += o_move
        np.clip(self.opos, 0.0, cfg.size, out=self.opos)
        # damage, deaths, cooldowns
        o_was = self.ohp > 0
        u_lost = np.minimum(taken, np.maximum(self.hp, 0)).sum(axis=1)
        o_lost = np.minimum(dealt, np.maximum(self.ohp, 0)).sum(axis=1)
        self.hp -= taken
        self.ohp -= dealt
        died = live & (self.hp <= 0)
        kills = (o_was & (self.ohp <= 0)).sum(axis=1)
        self.cd = np.where(att, self.cd_max, np.maximum(self.cd - 1, 0))
        self.ocd = np.where(o_att, self.cd_max, np.maximum(self.ocd - 1, 0))
        self.t += running
        self.owner = self._owners()
        # outcome
        us_out, them_out = ~(live & ~died).any(axis=1), ~(self.ohp > 0).any(axis=1)
        timeup = self.t >= cfg.max_steps
        held = (self.owner == 1).sum(axis=1) - (self.owner == -1).sum(axis=1)
        ended = running & (us_out | them_out | timeup)
        fight = ~us_out & ~them_out
        win = ended & ((them_out & ~us_out) | (fight & (held > 0)))
        loss = ended & ((us_out & ~them_out) | (fight & (held < 0)))
        self.won |= win
        if cfg.reward == "dense":
            team = (cfg.w_damage * o_lost / self.o_max_hp.sum() - cfg.w_taken * u_lost / self.max_hp.sum()
                    + cfg.w_kill * kills / K + cfg.w_point * held / self.P + cfg.w_win * (win.astype(float) - loss))
            rewards = np.where(live, team[:, None] + cfg.w_hit * hit_by_u, 0.0).astype(np.float32)
        else:       # sparse: paid once, on the last step, to the units alive at its start (never negative)
            paid = win if cfg.reward == "outcome" else ended * (self.owner == 1).sum(axis=1) / self.P
            rewards = np.where(live, cfg.w_win * paid[:, None], 0.0).astype(np.float32)
        terminated = live & (died | ended[:, None])
        self.alive = live & ~terminated
        d2 = self._d2()
        self.obs = np.where(live[..., None], self._observe(d2), self.obs)
        self.action_mask = self._mask(d2)
        return EnvStep(rewards, terminated, np.zeros_like(terminated), np.asarray(~self.alive.any(axis=1)))

    def state(self) -> np.ndarray:
        s = self.cfg.size
        cdm = np.maximum(self.cd_max, 1)
        parts = [self.pos.reshape(self.n_envs, -1) / s, np.maximum(self.hp, 0) / self.max_hp, self.cd / cdm,
                 self.opos.reshape(self.n_envs, -1) / s, np.maximum(self.ohp, 0) / self.o_max_hp, self.ocd / cdm,
                 self.owner, (self.t / self.cfg.max_steps)[:, None]]
        return np.concatenate(parts, axis=1).astype(np.float32)

    def positions(self) -> np.ndarray:
        """Learning units' positions [E, U, 2] as (x, y)."""
        return self.pos.copy()

    def episode_info(self, env_index: int) -> dict[str, float]:
        e = env_index
        return {"win": float(self.won[e]), "points_held": float((self.owner[e] == 1).mean()),
                "enemies_killed": float((self.ohp[e] <= 0).mean()), "units_lost": float((self.hp[e] <= 0).mean())}
