"""SpreadBatch: MPE2 simple_spread (v3) dynamics vectorised with numpy over E env copies.

A helper module for scenarios (it defines no SCENARIO). It reproduces what
`mpe2.simple_spread_v3.parallel_env(N, local_ratio, max_cycles, continuous_actions=False)` computes,
with the same float64 operations in the same order, so observations, rewards and truncations equal
mpe2's (bit for bit on the machines tested); states copied in with `set_state` evolve identically.

The world, as mpe2 builds it (`dynamic_rescaling` only scales the rendered radii, not the physics):
N agents "agent_0".."agent_{N-1}" (size 0.15, collide, movable, silent, mass 1, no max_speed, no
accel so sensitivity 5, no noise), N landmarks (size 0.05, no collision, fixed), dt 0.1,
damping 0.25, contact_force 100, contact_margin 1e-3, dim_c 2.

Actions Discrete(5): 0 no-op, 1 u=(-5, 0), 2 u=(+5, 0), 3 u=(0, -5), 4 u=(0, +5).
Step: force_i = u_i + sum_{j != i, ascending j} 100 * (p_i - p_j) / d_ij * logaddexp(0, -(d_ij - 0.3)/k) * k;
p += v dt; v = v (1 - damping) + force / mass * dt. Reward of agent i, after the move:
local_ratio * (-#{j != i: d_ij < 0.3}) + (1 - local_ratio) * (-sum_l min_a |p_a - q_l|).
Observation (float32) of agent i: [v_i, p_i, q_l - p_i for each landmark l, p_j - p_i for each other
agent j in index order, comm of each other agent (2 zeros each: agents are silent)].
All agents are truncated after max_cycles steps; nothing terminates (terminate_on_success=False).
state() is the concatenation of all agents' observations (mpe2's `state()`).

Seeding: copy e draws its episodes from `np.random.default_rng(seed + e)` exactly as mpe2's
`reset_world` draws from its generator (agents then landmarks, uniform(-1, 1)); gymnasium seeds
mpe2 the same way, so copy e starts where `parallel_env.reset(seed=seed + e)` starts, and later
episodes match mpe2's unseeded `reset()`s.
"""
from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from hdppo import EnvStep, NumpyBatch
from hdppo.sims import copy_rngs

AGENT_SIZE = 0.15
LANDMARK_SIZE = 0.05
DT = 0.1
DAMPING = 0.25
MASS = 1.0
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0
DIM_C = 2
CAPTURE_RADIUS = 0.1     # mpe2's benchmark / terminate_on_success threshold (episode_info only)
# discrete action -> unit direction, as mpe2 SimpleEnv._set_action (then *= sensitivity)
ACTION_DIR = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])


class SpreadBatch(NumpyBatch):
    """E copies of simple_spread with N agents and N landmarks; `step` loops over neither."""

    def __init__(self, n_agents: int = 3, local_ratio: float = 0.5, max_cycles: int = 25, n_envs: int = 1,
                 seed: int | None = None) -> None:
        if int(n_agents) < 1:
            raise ValueError(f"SpreadBatch needs n_agents >= 1, got {n_agents}")
        if not 0.0 <= float(local_ratio) <= 1.0:
            raise ValueError(f"local_ratio is a proportion in [0, 1], got {local_ratio}")
        if int(max_cycles) < 1 or int(n_envs) < 1:
            raise ValueError("max_cycles and n_envs must be >= 1")
        self.n_agents = N = int(n_agents)
        self.n_landmarks = L = N
        self.local_ratio = float(local_ratio)
        self.max_cycles = int(max_cycles)
        self.n_envs = E = int(n_envs)
        self.units = [f"agent_{i}" for i in range(N)]
        self.obs_dim = D = 4 + 2 * L + 2 * (N - 1) + DIM_C * (N - 1)
        self.obs_space = gym.spaces.Box(-np.float32(np.inf), np.float32(np.inf), (D,), np.float32)
        self.action_space = gym.spaces.Discrete(5)
        self.state_space = gym.spaces.Box(-np.float32(np.inf), np.float32(np.inf), (N * D,), np.float32)
        self.action_mask = None
        # observation = G 2-vectors: vel, pos, L landmarks, N-1 others, N-1 comms (zeros)
        self._groups = 2 + L + 2 * (N - 1)
        self._others = np.array([[j for j in range(N) if j != i] for i in range(N)], np.int64).reshape(N, N - 1)
        self._arange = np.arange(N)
        self._u_table = np.ascontiguousarray((ACTION_DIR * SENSITIVITY).T)   # [2, 5]
        self._dist_min = AGENT_SIZE + AGENT_SIZE
        # state, float64 like mpe2, stored component-major ([2, E, N]: x then y) so every array op
        # runs over long contiguous rows; `pos` / `vel` / `landmarks` give [E, N, 2] views
        self._p = np.zeros((2, E, N))
        self._v = np.zeros((2, E, N))
        self._q = np.zeros((2, E, L))
        self.t = np.zeros(E, np.int64)
        self.alive = np.zeros((E, N), bool)
        self.obs = np.zeros((E, N, D), np.float32)
        self.collisions = np.zeros(E, np.int64)      # colliding agent pairs summed over the episode's steps
        self._rel = np.zeros((N, 2, E, N))            # [j, c, e, i] = p_j - p_i
        self._dist = np.full((N, E, N), np.inf)       # [j, e, i] = |p_j - p_i|, inf for j == i
        self._lrel = np.zeros((2, E, N, L))           # [c, e, a, l] = p_a - q_l
        self._lm_dist = np.zeros((E, N, L))           # [e, a, l] = |p_a - q_l|
        self._rng = copy_rngs(seed, E)
        self.reset_done(np.ones(E, bool))

    @property
    def pos(self) -> np.ndarray:
        """Agent positions [E, N, 2] (a float64 view)."""
        return self._p.transpose(1, 2, 0)

    @property
    def vel(self) -> np.ndarray:
        """Agent velocities [E, N, 2] (a float64 view)."""
        return self._v.transpose(1, 2, 0)

    @property
    def landmarks(self) -> np.ndarray:
        """Landmark positions [E, L, 2] (a float64 view)."""
        return self._q.transpose(1, 2, 0)

    # ---- episodes --------------------------------------------------------------------------
    def reset_done(self, mask: np.ndarray) -> None:
        envs = np.flatnonzero(np.asarray(mask, bool))
        if len(envs) == 0:
            return
        N, L = self.n_agents, self.n_landmarks
        for e in envs:   # per-copy generators; mpe2 draws each agent's (x, y), then each landmark's
            rng = self._rng[e]
            self.pos[e] = rng.uniform(-1, +1, (N, 2))
            self.landmarks[e] = rng.uniform(-1, +1, (L, 2))
        self.vel[envs] = 0.0
        self._start(envs)

    def set_state(self, e: int, agent_pos: Sequence, agent_vel: Sequence, landmark_pos: Sequence,
                  t: int = 0) -> None:
        """Start copy e from a given world state ([N, 2] float64 each), at step t of its episode."""
        p = np.asarray(agent_pos, np.float64).reshape(self.n_agents, 2)
        v = np.asarray(agent_vel, np.float64).reshape(self.n_agents, 2)
        q = np.asarray(landmark_pos, np.float64).reshape(self.n_landmarks, 2)
        if not 0 <= int(t) < self.max_cycles:
            raise ValueError(f"t={t} is outside the episode [0, {self.max_cycles})")
        self.pos[e], self.vel[e], self.landmarks[e] = p, v, q
        self._start(np.array([e]))
        self.t[e] = int(t)

    def _start(self, envs: np.ndarray) -> None:
        self.t[envs] = 0
        self.alive[envs] = True
        self.collisions[envs] = 0
        self._measure()
        self.obs[envs] = self._observe()[envs]

    # ---- physics ---------------------------------------------------------------------------
    def _measure(self) -> None:
        """Pairwise agent vectors / distances and agent-landmark vectors / distances, as mpe2 computes them."""
        p = self._p
        rel = p.transpose(2, 0, 1)[:, :, :, None] - p[None]                  # [j, c, e, i] = p_j - p_i
        sq = rel * rel
        dist = np.sqrt(sq[:, 0] + sq[:, 1])                                   # sqrt(sum(square(delta)))
        dist[self._arange, :, self._arange] = np.inf                          # no self-contact
        lrel = p[:, :, :, None] - self._q[:, :, None, :]                      # [c, e, a, l] = p_a - q_l
        lsq = lrel * lrel
        self._rel, self._dist, self._lrel = rel, dist, lrel
        self._lm_dist = np.sqrt(lsq[0] + lsq[1])

    def _observe(self) -> np.ndarray:
        """Fresh observations [E, N, D] float32 (float64 values rounded once, as mpe2's astype)."""
        E, N, L = self.n_envs, self.n_agents, self.n_landmarks
        out = np.zeros((E, N, self._groups, 2), np.float32)                  # comm slots stay 0 (silent)
        oc = out.transpose(3, 0, 1, 2)                                         # [c, e, i, group]
        oc[:, :, :, 0] = self._v
        oc[:, :, :, 1] = self._p
        oc[:, :, :, 2:2 + L] = -self._lrel                                    # q_l - p_i
        p = self._p
        oc[:, :, :, 2 + L:1 + L + N] = p[:, :, self._others] - p[:, :, :, None]   # p_j - p_i, j != i ascending
        return out.reshape(E, N, self.obs_dim)

    def step(self, actions: np.ndarray) -> EnvStep:
        E, N = self.n_envs, self.n_agents
        a = np.asarray(actions)
        if a.shape == (E, N, 1):
            a = a[..., 0]
        if a.shape != (E, N):
            raise ValueError(f"actions have shape {a.shape}, expected {(E, N)}")
        a = a.astype(np.int64, copy=False)
        live = self.alive.copy()
        if (live & ((a < 0) | (a > 4))).any():
            raise ValueError("simple_spread actions are 0..4 (no-op, left, right, down, up)")
        copy_live = live.any(axis=1)                                          # [E] copies still running
        u = self._u_table[:, np.where(live, a, 0)]                            # [2, E, N]
        # contact forces between agents (landmarks do not collide): f_ij = 100 (p_i - p_j) / d_ij * pen_ij
        k = CONTACT_MARGIN
        dist = self._dist
        pen = np.logaddexp(0, -(dist - self._dist_min) / k) * k               # 0 for j == i (d = inf)
        f = CONTACT_FORCE * -self._rel / dist[:, None] * pen[:, None]         # [j, c, e, i]; -rel = p_i - p_j
        # mpe2 starts from u_i and adds each pair's force in ascending j; reducing over the leading
        # axis of a C-ordered array adds the slices one after the other, in that order
        force = np.add.reduce(np.concatenate([u[None], f], axis=0), axis=0)   # [2, E, N]
        pos = self._p + self._v * DT
        vel = self._v * (1 - DAMPING)
        vel = vel + (force / MASS) * DT
        if copy_live.all():
            self._p, self._v = pos, vel
        else:
            self._p = np.where(copy_live[:, None], pos, self._p)
            self._v = np.where(copy_live[:, None], vel, self._v)
        self._measure()
        # rewards after the move
        hits = self._dist < self._dist_min                                    # [j, e, i], False for j == i
        n_hits = hits.sum(axis=0)                                             # [e, i]
        agent_rew = -n_hits.astype(np.float64)                                # 0 - 1.0 - 1.0 ...
        global_rew = -np.cumsum(self._lm_dist.min(axis=1), axis=1)[:, -1]    # 0 - m_0 - m_1 - ... in order
        lr = self.local_ratio
        rew = global_rew[:, None] * (1 - lr) + agent_rew * lr
        rewards = np.where(live, rew, 0.0).astype(np.float32)
        self.collisions += np.where(copy_live, n_hits.sum(axis=1) // 2, 0)
        self.t += copy_live
        truncated = live & (self.t >= self.max_cycles)[:, None]
        self.alive = live & ~truncated
        self.obs = np.where(live[:, :, None], self._observe(), self.obs)
        return EnvStep(rewards, np.zeros_like(live), truncated, np.asarray(~self.alive.any(axis=1)))

    # ---- views -----------------------------------------------------------------------------
    def state(self) -> np.ndarray:
        """[E, N * D]: every agent's observation, concatenated in agent order (mpe2's state())."""
        return self.obs.reshape(self.n_envs, -1).copy()

    def positions(self) -> np.ndarray:
        """Agent positions [E, N, 2] (float32)."""
        return self.pos.astype(np.float32)

    def episode_info(self, env_index: int) -> dict[str, float]:
        covered = self._lm_dist[env_index].min(axis=0) < CAPTURE_RADIUS
        return {"landmarks_covered": float(covered.mean()), "success": float(covered.all()),
                "min_dist_sum": float(self._lm_dist[env_index].min(axis=0).sum()),
                "collisions": float(self.collisions[env_index])}
