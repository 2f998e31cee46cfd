"""MAgent2 battle for hdppo: the unit observation, a vectorised scripted fighter, and BattleBatch.

A helper module of `scenarios/battle.py` (it defines no SCENARIO).

Unit observation (float32, VIEW_DIM + N_FEAT = 855): MAgent2's 13x13x5 view (rows = y, columns = x;
channels obstacle, own-team presence, own-team hp, enemy presence, enemy hp), flattened, then the
feature vector FEAT (all from the unit's own team's perspective, living agents only):
  x, y / (map_size - 1) (2); enemy centroid - unit / (map_size - 1) (2); nearest enemy - unit /
  (map_size - 1) (2); own hp (1, the view's centre); own team alive fraction (1); enemy alive
  fraction (1); t / max_cycles (1). Vectors are 0 when the enemy team is gone.

`BattleParallelEnv` is battle_v4's parallel env with that observation, ending the episode
(every remaining agent terminated) as soon as one team is wiped out, and with magent2 0.3's
first-step bug fixed (reset() counted the teams before placing them, so the first step after a
reset split the action list wrongly and blue took red's actions). `BattleBatch` drives E of its
MAgent2 engines through the raw GridWorld API (set_action / step / get_observation / clear_dead):
the same numbers as the PettingZoo env stepped with the same actions, with blue driven by an
array controller and per-copy episode metrics (win, survivors, kills).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo import BatchedEnv, EnvStep

VIEW = 13
CH = 5
VIEW_DIM = VIEW * VIEW * CH
N_FEAT = 10
OBS_DIM = VIEW_DIM + N_FEAT
X, Y, ECX, ECY, NEX, NEY, HP, OWN, ENEMY, T = range(VIEW_DIM, OBS_DIM)      # feature offsets in the obs
N_ACTIONS = 21
STAY = 6
# move actions 0..12: cells of a radius-2 circle, row-major (dy first); attack 13..20: the 8 neighbours
MOVES = np.array([(0, -2), (-1, -1), (0, -1), (1, -1), (-2, 0), (-1, 0), (0, 0), (1, 0), (2, 0),
                  (-1, 1), (0, 1), (1, 1), (0, 2)], np.float64)
ATTACK_BASE = 13
ADJ_R = np.array([5, 5, 5, 6, 6, 7, 7, 7])      # view rows (dy) of attack targets 0..7
ADJ_C = np.array([5, 6, 7, 5, 7, 5, 6, 7])      # view columns (dx)
ENEMY_CH, ENEMY_HP_CH = 3, 4

OBS_LOW = np.concatenate([np.zeros(VIEW_DIM), [0, 0, -1, -1, -1, -1, 0, 0, 0, 0]]).astype(np.float32)
OBS_HIGH = np.concatenate([np.full(VIEW_DIM, 2.0), np.ones(N_FEAT)]).astype(np.float32)
OBS_SPACE = gym.spaces.Box(OBS_LOW, OBS_HIGH, dtype=np.float32)

Controller = Callable[[np.ndarray, np.random.Generator], np.ndarray]   # obs [n, OBS_DIM] -> actions [n]


def features(pos: np.ndarray, alive: np.ndarray, enemy_pos: np.ndarray, enemy_alive: np.ndarray,
             hp: np.ndarray, n_own: int, n_enemy: int, t: int, max_cycles: int, map_size: int) -> np.ndarray:
    """FEAT [n, N_FEAT] of one team's agents (pos [n, 2] as (x, y)); enemies counted only if alive."""
    s = float(map_size - 1)
    p = pos.astype(np.float64)
    out = np.zeros((len(p), N_FEAT), np.float64)
    out[:, 0:2] = p / s
    foe = enemy_pos[enemy_alive].astype(np.float64)
    if len(foe) and len(p):
        out[:, 2:4] = (foe.mean(axis=0) - p) / s
        rel = foe[None, :, :] - p[:, None, :]                                # [n, m, 2]
        nearest = (rel ** 2).sum(axis=2).argmin(axis=1)
        out[:, 4:6] = rel[np.arange(len(p)), nearest] / s
    out[:, 6] = hp
    out[:, 7] = alive.sum() / n_own
    out[:, 8] = enemy_alive.sum() / n_enemy
    out[:, 9] = t / max_cycles
    return out.astype(np.float32)


def observe(view: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """Flat unit observations [n, OBS_DIM] from views [n, 13, 13, 5] and FEAT [n, N_FEAT]."""
    return np.concatenate([view.reshape(len(view), -1), feats], axis=1)


def fight(obs: np.ndarray, target: np.ndarray, approach: np.ndarray | bool = True) -> np.ndarray:
    """Scripted fighter: attack the weakest adjacent enemy, else one move toward `target` [n, 2] (cells).

    With `approach`, the move stops next to the target rather than on it (an enemy's cell).
    """
    n = len(obs)
    view = obs[:, :VIEW_DIM].reshape(n, VIEW, VIEW, CH)
    present = view[:, ADJ_R, ADJ_C, ENEMY_CH] > 0                               # [n, 8]
    hp = np.where(present, view[:, ADJ_R, ADJ_C, ENEMY_HP_CH], np.inf)
    d = np.linalg.norm(target[:, None, :] - MOVES[None], axis=2)              # [n, 13] distance after the move
    d = d + np.where(np.asarray(approach, bool).reshape(-1, 1) & (d < 0.5), 100.0, 0.0)
    move = np.where(np.linalg.norm(target, axis=1) < 0.5, STAY, d.argmin(axis=1))
    return np.where(present.any(axis=1), ATTACK_BASE + hp.argmin(axis=1), move).astype(np.int32)


def scripted_controller(map_size: int, eps: float) -> Controller:
    """Attack an adjacent enemy, else move toward the nearest enemy; a random action with prob. eps."""
    s = float(map_size - 1)

    def act(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        a = fight(obs, obs[:, [NEX, NEY]] * s)
        if eps > 0:
            a = np.where(rng.random(len(a)) < eps, rng.integers(N_ACTIONS, size=len(a)), a)
        return a.astype(np.int32)
    return act


def random_controller(obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(N_ACTIONS, size=len(obs)).astype(np.int32)


def make_parallel_env(map_size: int, max_cycles: int, reward_args: dict, seed: int | None = None,
                      render_mode: str | None = None) -> Any:
    """battle_v4's parallel env with hdppo's flat unit observation; ends when a team is wiped out."""
    from magent2.environments.battle.battle import _parallel_env, default_reward_args

    class BattleParallelEnv(_parallel_env):
        metadata = {**_parallel_env.metadata, "name": "battle_hdppo_v0"}

        def __init__(self) -> None:
            args = dict(default_reward_args)
            args.update(reward_args)
            super().__init__(map_size, False, args, max_cycles, False, render_mode, seed)
            self.n_team = [self.env.get_num(h) for h in self.handles]
            self.observation_spaces = {a: OBS_SPACE for a in self.possible_agents}
            self._zero_obs = {a: np.zeros(OBS_DIM, np.float32) for a in self.possible_agents}

        def reset(self, seed=None, options=None):
            out = super().reset(seed=seed, options=options)
            # magent2 0.3 counts the teams before placing them, so the first step would split the
            # action list wrongly (blue takes red's actions); count them again
            self.team_sizes = [self.env.get_num(h) for h in self.handles]
            return out

        def _compute_observations(self) -> dict:
            g, h = self.env, self.handles
            pos = [g.get_pos(x) for x in h]
            alive = [g.get_alive(x) for x in h]
            out = {}
            for k in (0, 1):
                view, _ = g.get_observation(h[k])
                f = features(pos[k], alive[k], pos[1 - k], alive[1 - k], view[:, 6, 6, 2], self.n_team[k],
                             self.n_team[1 - k], self.frames, self.max_cycles, self.map_size)
                for i, ob in zip(g.get_agent_id(h[k]), observe(view, f)):
                    out[self.possible_agents[i]] = ob
            live = set(self.agents)
            return {a: out.get(a, self._zero_obs[a]) for a in self.possible_agents if a in live}

        def step(self, actions: dict):
            obs, rew, term, trunc, info = super().step(actions)
            if self.agents and min(self.env.get_num(x) for x in self.handles) == 0:
                for a in self.agents:
                    term[a] = True
                self.agents: list[str] = []
            return obs, rew, term, trunc, info

    return BattleParallelEnv()


class BattleBatch(BatchedEnv):
    """E MAgent2 battles; red (`red_0..`) are the units, blue is driven by `opponent` on arrays."""

    def __init__(self, map_size: int, max_cycles: int, reward_args: dict, n_envs: int, seed: int | None,
                 opponent: Controller) -> None:
        self.n_envs = E = int(n_envs)
        self.map_size, self.max_cycles = int(map_size), int(max_cycles)
        self.envs = [make_parallel_env(map_size, max_cycles, reward_args) for _ in range(E)]
        self.n_red, self.n_blue = self.envs[0].n_team
        self.units = [f"red_{i}" for i in range(self.n_red)]
        self.obs_space = OBS_SPACE
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self.action_mask = None
        self.opponent = opponent
        self.obs = np.zeros((E, self.n_red, OBS_DIM), np.float32)
        self.blue_obs = np.zeros((E, self.n_blue, OBS_DIM), np.float32)
        self.alive = np.zeros((E, self.n_red), bool)
        self.blue_alive = np.zeros((E, self.n_blue), bool)
        self.t = np.zeros(E, np.int64)
        self._seed(seed)
        self.reset_done(np.ones(E, bool))

    def _seed(self, seed: int | None) -> None:
        ss = [np.random.SeedSequence() for _ in range(self.n_envs)] if seed is None else \
            [np.random.SeedSequence([seed + e, 104729]) for e in range(self.n_envs)]
        self._rng = [np.random.default_rng(s) for s in ss]
        if seed is not None:
            for e, env in enumerate(self.envs):
                env.env.set_seed(seed + e)

    # ---- episodes --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """New episodes everywhere; with a seed copy e restarts from seed + e (as env.reset(seed=seed + e))."""
        if seed is not None:
            self._seed(seed)
        self.reset_done(np.ones(self.n_envs, bool))

    def reset_done(self, mask: np.ndarray) -> None:
        for e in np.flatnonzero(np.asarray(mask, bool)):
            env = self.envs[e]
            env.env.reset()
            env.generate_map()
            self.t[e] = 0
            self.obs[e] = 0.0
            self.blue_obs[e] = 0.0
            self._observe(int(e))

    def _observe(self, e: int) -> None:
        """Read copy e's engine (before clear_dead): obs of every agent still in it, alive flags."""
        g, h = self.envs[e].env, self.envs[e].handles
        ids = [g.get_agent_id(x) for x in h]
        pos = [g.get_pos(x) for x in h]
        alive = [g.get_alive(x) for x in h]
        n = (self.n_red, self.n_blue)
        for k, dest, flag in ((0, self.obs, self.alive), (1, self.blue_obs, self.blue_alive)):
            view, _ = g.get_observation(h[k])
            f = features(pos[k], alive[k], pos[1 - k], alive[1 - k], view[:, 6, 6, 2], n[k], n[1 - k],
                         int(self.t[e]), self.max_cycles, self.map_size)
            idx = ids[k] - (0 if k == 0 else self.n_red)
            dest[e, idx] = observe(view, f)
            flag[e] = False
            flag[e, idx] = alive[k]

    # ---- stepping --------------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> EnvStep:
        E, U = self.n_envs, self.n_red
        a = np.asarray(actions).reshape(E, U).astype(np.int32)
        live = self.alive.copy()
        if (live & ((a < 0) | (a >= N_ACTIONS))).any():
            raise ValueError(f"battle actions are 0..{N_ACTIONS - 1}")
        rewards = np.zeros((E, U), np.float32)
        for e in np.flatnonzero(live.any(axis=1)):
            g, h = self.envs[e].env, self.envs[e].handles
            red_ids = g.get_agent_id(h[0])
            g.set_action(h[0], np.ascontiguousarray(a[e, red_ids]))
            blue = g.get_agent_id(h[1]) - self.n_red
            if len(blue):
                g.set_action(h[1], np.ascontiguousarray(self.opponent(self.blue_obs[e, blue], self._rng[e]), np.int32))
            g.step()
            self.t[e] += 1
            rewards[e, red_ids] = g.get_reward(h[0])
            self._observe(int(e))
            g.clear_dead()
        died = live & ~self.alive
        wiped = np.asarray(~self.blue_alive.any(axis=1) | ~self.alive.any(axis=1))   # [E] one team is gone
        terminated = died | (live & wiped[:, None])
        truncated = live & ~terminated & (self.t >= self.max_cycles)[:, None]
        self.alive = live & ~terminated & ~truncated
        return EnvStep(rewards, terminated, truncated, np.asarray(~self.alive.any(axis=1)))

    def episode_info(self, env_index: int) -> dict[str, float]:
        """win: red has more survivors than blue at the end (a tie, mutual wipe included, is 0)."""
        red = int(self._survivors(env_index, 0))
        blue = int(self._survivors(env_index, 1))
        return {"win": float(red > blue), "draw": float(red == blue), "survivors": red / self.n_red,
                "kills": 1.0 - blue / self.n_blue}

    def _survivors(self, e: int, k: int) -> int:
        return self.envs[e].env.get_num(self.envs[e].handles[k])

    def close(self) -> None:
        self.envs = []
