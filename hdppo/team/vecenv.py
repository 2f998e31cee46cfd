"""Batched environments: many env copies stepped as arrays over (copy, unit).

`BatchedEnv` is the interface the hierarchy steps. Native scenarios implement it with numpy over
all copies at once; `PettingZooBatch` adapts copies of any PettingZoo ParallelEnv, converting the
per-agent dicts to preallocated arrays once per step.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np


@dataclass
class EnvStep:
    """What one step of all copies returns; arrays over [E, U] units unless noted."""

    rewards: np.ndarray      # float32 env rewards (0 for units not alive before the step)
    terminated: np.ndarray   # bool: the unit ended this step without bootstrap (death, win, loss)
    truncated: np.ndarray    # bool: the unit ended this step by a time limit (bootstrap)
    done: np.ndarray         # bool [E]: the copy's episode is over for the team


class BatchedEnv(ABC):
    """E env copies of U trained units. Subclasses fill the attributes and implement the methods.

    After `reset`/`step`, `obs` [E, U, D] float32 holds each unit's flat observation (a dead unit
    keeps its last one), `alive` [E, U] bool says which units still act, and `action_mask`
    [E, U, A] bool (or None) says which actions each unit may take.
    """

    n_envs: int
    units: list[str]
    obs_space: gym.spaces.Box          # per unit, flat
    action_space: gym.Space            # per unit (padded to the largest)
    state_space: gym.spaces.Box | None = None
    obs: np.ndarray
    alive: np.ndarray
    action_mask: np.ndarray | None = None

    @abstractmethod
    def reset(self, seed: int | None = None) -> None:
        """Start new episodes in every copy (copy e seeded with seed + e when seed is given)."""

    @abstractmethod
    def reset_done(self, mask: np.ndarray) -> None:
        """Start new episodes in the copies where mask [E] is True."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> EnvStep:
        """Step every copy; actions [E, U] (Discrete) or [E, U, A]; dead units' actions are ignored."""

    def state(self) -> np.ndarray:
        """Global state [E, Ds] for centralized layers; only when state_space is set."""
        from hdppo.errors import ScenarioError
        raise ScenarioError(f"{type(self).__name__} has no global state",
                            "set use_state=False on the layer, or give the env a state() method")

    def episode_info(self, env_index: int) -> dict[str, float]:
        """Scenario metrics of a copy whose episode just ended (e.g. win), read before its reset."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional: an env that holds nothing to release keeps this no-op
        pass


def copy_rngs(seed: int | None, n: int) -> list[np.random.Generator]:
    """One numpy Generator per env copy: copy e seeded with seed + e, or fresh entropy without a seed."""
    if seed is None:
        return [np.random.default_rng(s) for s in np.random.SeedSequence().spawn(n)]
    return [np.random.default_rng(seed + e) for e in range(n)]


class NumpyBatch(BatchedEnv):
    """A native batch whose copies each draw from their own Generator `self._rng[e]` (see copy_rngs),
    so E copies stepped together equal E single copies with the same seeds."""

    _rng: list[np.random.Generator]

    def reset(self, seed: int | None = None) -> None:
        """New episodes everywhere; with a seed copy e restarts from seed + e, else streams continue."""
        if seed is not None:
            self._rng = copy_rngs(seed, self.n_envs)
        self.reset_done(np.ones(self.n_envs, bool))


def flat_space(space: gym.Space) -> gym.spaces.Box:
    """A flat float32 Box for a unit's observation space."""
    if isinstance(space, gym.spaces.Box):
        return gym.spaces.Box(space.low.reshape(-1).astype(np.float32), space.high.reshape(-1).astype(np.float32),
                              dtype=np.float32)
    box = gym.spaces.flatten_space(space)
    if not isinstance(box, gym.spaces.Box):     # Graph and Sequence spaces vary in size
        from hdppo.errors import ScenarioError
        raise ScenarioError(f"observation space {space} has no fixed-size flat form",
                            "give units Box, Discrete, MultiDiscrete, or Tuple / Dict of those as observations")
    return gym.spaces.Box(box.low.astype(np.float32), box.high.astype(np.float32), dtype=np.float32)


def _is_mask_dict(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Dict) and "observation" in space.spaces and "action_mask" in space.spaces


def homogenize(env: Any, units: Sequence[str]) -> Any:
    """Pad units' differing observation / action spaces with SuperSuit so one layer policy serves all."""
    import supersuit

    obs_spaces = [env.observation_space(a) for a in env.possible_agents]
    if any(_is_mask_dict(s) for s in obs_spaces):
        return env  # dict observations with action masks are flattened by the adapter itself
    if len({(s.shape, tuple(np.ravel(s.low)), tuple(np.ravel(s.high))) if isinstance(s, gym.spaces.Box) else repr(s)
            for s in obs_spaces}) > 1:
        if any(isinstance(s, gym.spaces.Box) and len(s.shape) != 1 for s in obs_spaces):
            env = supersuit.flatten_v0(env)
        env = supersuit.pad_observations_v0(env)
    act_spaces = [env.action_space(a) for a in env.possible_agents]
    if len({repr(s) for s in act_spaces}) > 1:
        env = supersuit.pad_action_space_v0(env)
    return env


class PettingZooBatch(BatchedEnv):
    """E copies of a PettingZoo ParallelEnv stepped in one loop, exposed as arrays.

    Agents outside `units` are driven by `opponent` (a function of one copy's observations).
    Units whose spaces differ are padded with SuperSuit; padded Discrete actions are masked out.
    """

    def __init__(self, make_env: Callable[[], Any], units: Sequence[str], n_envs: int,
                 opponent: Callable[[int, Any], Callable[[dict], dict]] | None = None) -> None:
        raw = [make_env() for _ in range(n_envs)]
        self.raw_spaces = {a: (raw[0].observation_space(a), raw[0].action_space(a)) for a in raw[0].possible_agents}
        self.envs = [homogenize(e, units) for e in raw]
        self.n_envs = n_envs
        self.units = list(units)
        self.index = {a: i for i, a in enumerate(self.units)}
        env0 = self.envs[0]
        space0 = env0.observation_space(self.units[0])
        self._dict_obs = _is_mask_dict(space0)
        self._raw_obs_space = space0["observation"] if self._dict_obs else space0
        self._box_obs = isinstance(self._raw_obs_space, gym.spaces.Box)
        self.obs_space = flat_space(self._raw_obs_space)
        self.action_space = env0.action_space(self.units[0])
        if self._dict_obs and not isinstance(self.action_space, gym.spaces.Discrete):
            from hdppo.errors import ScenarioError
            raise ScenarioError(f"unit {self.units[0]!r} observes an action_mask but its action space is "
                                f"{self.action_space}: hdppo applies action masks to Discrete action spaces only",
                                "give the units a Discrete action space, or drop the action_mask from their "
                                "observations (a wrapper returning ob['observation'])")
        self.obs = np.zeros((n_envs, len(self.units), self.obs_space.shape[0]), dtype=np.float32)
        self.alive = np.zeros((n_envs, len(self.units)), dtype=bool)
        self.action_mask = self._base_mask()
        self._mask_base = None if self.action_mask is None else self.action_mask[0].copy()
        self.opponents = [a for a in env0.possible_agents if a not in self.index]
        self._opponent = [opponent(i, e) for i, e in enumerate(self.envs)] if opponent and self.opponents else None
        self._last_obs: list[dict] = [{} for _ in range(n_envs)]
        self.state_space = None
        state_space = getattr(env0, "state_space", None)
        if isinstance(state_space, gym.spaces.Box):
            self.state_space = flat_space(state_space)
        self._rewards = np.zeros((n_envs, len(self.units)), dtype=np.float32)
        self._term = np.zeros((n_envs, len(self.units)), dtype=bool)
        self._trunc = np.zeros((n_envs, len(self.units)), dtype=bool)
        self._seeded = False

    def _base_mask(self) -> np.ndarray | None:
        """Masks out the padding of Discrete action spaces (and prepares room for env-given masks)."""
        if not isinstance(self.action_space, gym.spaces.Discrete):
            return None
        n = int(self.action_space.n)
        sizes = [self.raw_spaces[u][1].n if isinstance(self.raw_spaces[u][1], gym.spaces.Discrete) else n
                 for u in self.units]
        if not self._dict_obs and all(s == n for s in sizes):
            return None
        base = np.arange(n)[None, :] < np.asarray(sizes)[:, None]
        return np.repeat(base[None], self.n_envs, axis=0)

    def _write_obs(self, e: int, observations: dict) -> None:
        self.alive[e] = False
        for agent, ob in observations.items():
            i = self.index.get(agent)
            if i is None:
                continue
            if self._dict_obs:
                # _base_mask gives dict observations a mask (their action space is Discrete: checked in __init__)
                assert self.action_mask is not None and self._mask_base is not None
                self.action_mask[e, i] = np.asarray(ob["action_mask"], dtype=bool) & self._mask_base[i]
                ob = ob["observation"]
            if self._box_obs:
                self.obs[e, i] = np.asarray(ob, dtype=np.float32).reshape(-1)
            else:   # Discrete, MultiDiscrete, Tuple...: Gymnasium's flattening (one-hot for Discrete)
                self.obs[e, i] = gym.spaces.flatten(self._raw_obs_space, ob)
        for agent in self.envs[e].agents:
            i = self.index.get(agent)
            if i is not None:
                self.alive[e, i] = True
        self._last_obs[e] = observations

    def reset(self, seed: int | None = None) -> None:
        for e, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if seed is None else seed + e)
            self.obs[e] = 0.0
            self._write_obs(e, obs)

    def reset_done(self, mask: np.ndarray) -> None:
        for e in np.flatnonzero(mask).tolist():
            obs, _ = self.envs[e].reset()
            self.obs[e] = 0.0
            self._write_obs(e, obs)

    def step(self, actions: np.ndarray) -> EnvStep:
        self._rewards[:] = 0.0
        self._term[:] = False
        self._trunc[:] = False
        done = np.zeros(self.n_envs, dtype=bool)
        discrete = isinstance(self.action_space, gym.spaces.Discrete)
        for e, env in enumerate(self.envs):
            live = env.agents
            act = {}
            for agent in live:
                i = self.index.get(agent)
                if i is not None:
                    a = actions[e, i]
                    act[agent] = int(a) if discrete else np.asarray(a)
            if self._opponent is not None:
                theirs = {a: o for a, o in self._last_obs[e].items() if a not in self.index and a in live}
                act.update(self._opponent[e](theirs))
            obs, rew, term, trunc, _ = env.step(act)
            for agent, r in rew.items():
                i = self.index.get(agent)
                if i is not None:
                    self._rewards[e, i] = r
                    self._term[e, i] = term.get(agent, False)
                    self._trunc[e, i] = trunc.get(agent, False)
            was_alive = self.alive[e].copy()
            self._write_obs(e, obs)
            # a unit that vanished without a flag ended all the same: count it as terminated
            vanished = was_alive & ~self.alive[e] & ~self._term[e] & ~self._trunc[e]
            self._term[e] |= vanished
            self._term[e] &= was_alive
            self._trunc[e] &= was_alive & ~self._term[e]
            self.alive[e] &= ~(self._term[e] | self._trunc[e])
            done[e] = not self.alive[e].any()
        return EnvStep(self._rewards.copy(), self._term.copy(), self._trunc.copy(), done)

    def state(self) -> np.ndarray:
        return np.stack([np.asarray(env.state(), dtype=np.float32).reshape(-1) for env in self.envs])

    def close(self) -> None:
        for env in self.envs:
            env.close()


def random_opponent(seed: int) -> Callable[[int, Any], Callable[[dict], dict]]:
    """An opponent controller that samples each agent's action space (seeded per copy)."""
    def make(index: int, env: Any) -> Callable[[dict], dict]:
        rng = np.random.default_rng(seed + 7919 * (index + 1))

        def act(observations: dict) -> dict:
            out = {}
            for agent, ob in observations.items():
                space = env.action_space(agent)
                if isinstance(space, gym.spaces.Discrete):
                    if isinstance(ob, dict) and "action_mask" in ob:
                        legal = np.flatnonzero(ob["action_mask"])
                        out[agent] = int(rng.choice(legal)) if len(legal) else 0
                    else:
                        out[agent] = int(rng.integers(space.n))
                else:
                    space.seed(int(rng.integers(2**31)))
                    out[agent] = space.sample()
            return out
        return act
    return make
