"""PettingZoo as a batched env: `PettingZooBatch` steps E copies of any PettingZoo ParallelEnv and
converts the per-agent dicts to preallocated arrays over (copy, unit) once per step.

Episode metrics of a copy (`episode_info(e)`, read when its episode ends, before its reset) come
from two places: the numbers of an `infos[unit]["episode"]` mapping, each unit's latest one
averaged over the units that gave one, and the scenario's `episode_info(env)` hook, called on the
copy as `env(cfg)` returned it (its values win).

Every unit's observation (and action mask) must have its space's shape: one of another shape is
refused naming the unit, the copy and the episode step (numpy would broadcast a scalar into every
feature, or fail without saying which unit). The check compares shapes only, never values.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep, flat_space


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
                 opponent: Callable[[int, Any], Callable[[dict], dict]] | None = None,
                 episode_info: Callable[[Any], Mapping[str, float]] | None = None) -> None:
        raw = [make_env() for _ in range(n_envs)]
        self.raw_envs = raw                       # as env(cfg) returned them, before any padding
        self._episode_hook = episode_info
        self._episode_infos: list[dict[int, Mapping]] = [{} for _ in range(n_envs)]   # unit -> infos["episode"]
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
            raise ScenarioError(f"unit {self.units[0]!r} observes an action_mask but its action space is "
                                f"{self.action_space}: hdppo applies action masks to Discrete action spaces only",
                                "give the units a Discrete action space, or drop the action_mask from their "
                                "observations (a wrapper returning ob['observation'])")
        self.obs = np.zeros((n_envs, len(self.units), self.obs_space.shape[0]), dtype=np.float32)
        self._obs_shape = tuple(self._raw_obs_space.shape or ()) if self._box_obs else self.obs.shape[2:]
        self._t = np.zeros(n_envs, dtype=np.int64)      # each copy's episode step, for the shape errors
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

    def _write_obs(self, e: int, observations: dict, step: int = -1) -> None:
        """Copy e's observations (of its reset, or of its episode step `step`) into the arrays."""
        self.alive[e] = False
        for agent, ob in observations.items():
            i = self.index.get(agent)
            if i is None:
                continue
            if self._dict_obs:
                # _base_mask gives dict observations a mask (their action space is Discrete: checked in __init__)
                assert self.action_mask is not None and self._mask_base is not None
                mask = np.asarray(ob["action_mask"], dtype=bool)
                if mask.shape != self._mask_base[i].shape:
                    raise self._bad_shape("action mask", agent, e, step, mask.shape, self._mask_base[i].shape)
                self.action_mask[e, i] = mask & self._mask_base[i]
                ob = ob["observation"]
            if self._box_obs:
                a = np.asarray(ob, dtype=np.float32)
                if a.shape != self._obs_shape:
                    raise self._bad_shape("observation", agent, e, step, a.shape, self._obs_shape)
                self.obs[e, i] = a.reshape(-1)
            else:   # Discrete, MultiDiscrete, Tuple...: Gymnasium's flattening (one-hot for Discrete)
                try:
                    flat = np.asarray(gym.spaces.flatten(self._raw_obs_space, ob))
                except (ValueError, TypeError, IndexError, KeyError, AssertionError) as exc:
                    raise self._bad_shape("observation", agent, e, step, f"{ob!r} ({type(exc).__name__}: {exc})",
                                          self._raw_obs_space) from None
                if flat.shape != self._obs_shape:
                    raise self._bad_shape("observation", agent, e, step, flat.shape, self._obs_shape)
                self.obs[e, i] = flat
        for agent in self.envs[e].agents:
            i = self.index.get(agent)
            if i is not None:
                self.alive[e, i] = True
        self._last_obs[e] = observations

    def _bad_shape(self, what: str, agent: str, e: int, step: int, got: Any, want: Any) -> ScenarioError:
        when = "at its reset" if step < 0 else f"at episode step {step}"
        shape = f"shape {got}" if isinstance(got, tuple) else got
        space = f"has shape {want}" if isinstance(want, tuple) else f"is {want}"
        return ScenarioError(f"the env gave unit {agent!r} an {what} of {shape}, but its space {space} "
                             f"(copy {e}, {when})",
                             f"return every {what} in its space's shape, or declare the space it really has")

    def reset(self, seed: int | None = None) -> None:
        for e, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if seed is None else seed + e)
            self.obs[e] = 0.0
            self._t[e] = 0
            self._write_obs(e, obs)
            self._episode_infos[e] = {}

    def reset_done(self, mask: np.ndarray) -> None:
        for e in np.flatnonzero(mask).tolist():
            obs, _ = self.envs[e].reset()
            self.obs[e] = 0.0
            self._t[e] = 0
            self._write_obs(e, obs)
            self._episode_infos[e] = {}

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
            obs, rew, term, trunc, infos = env.step(act)
            for agent, r in rew.items():
                i = self.index.get(agent)
                if i is not None:
                    self._rewards[e, i] = r
                    self._term[e, i] = term.get(agent, False)
                    self._trunc[e, i] = trunc.get(agent, False)
                    info = infos.get(agent)
                    if isinstance(info, Mapping) and isinstance(info.get("episode"), Mapping):
                        self._episode_infos[e][i] = info["episode"]
            was_alive = self.alive[e].copy()
            self._write_obs(e, obs, int(self._t[e]))
            self._t[e] += 1
            # a unit that vanished without a flag ended all the same: count it as terminated
            vanished = was_alive & ~self.alive[e] & ~self._term[e] & ~self._trunc[e]
            self._term[e] |= vanished
            self._term[e] &= was_alive
            self._trunc[e] &= was_alive & ~self._term[e]
            self.alive[e] &= ~(self._term[e] | self._trunc[e])
            done[e] = not self.alive[e].any()
        return EnvStep(self._rewards.copy(), self._term.copy(), self._trunc.copy(), done)

    def episode_info(self, env_index: int) -> dict[str, float]:
        """Copy e's episode metrics: its units' infos["episode"] numbers (mean over the units that gave
        one), then the scenario's episode_info(env) hook on the copy."""
        out: dict[str, float] = {}
        given = list(self._episode_infos[env_index].values())
        for key in dict.fromkeys(k for d in given for k in d):
            vals = [float(d[key]) for d in given if isinstance(d.get(key), (int, float, np.number))]
            if vals:                            # numbers only: other entries (text, arrays) are not metrics
                out[str(key)] = float(np.mean(vals))
        if self._episode_hook is not None:
            got = self._episode_hook(self.raw_envs[env_index])
            if not isinstance(got, Mapping):
                from hdppo.errors import ScenarioError
                raise ScenarioError(f"episode_info(env) returned a {type(got).__name__}, not a dict",
                                    "return a dict of metric name -> number, e.g. {'success': 1.0}")
            for key, value in got.items():
                try:
                    out[str(key)] = float(value)
                except (TypeError, ValueError):
                    from hdppo.errors import ScenarioError
                    raise ScenarioError(f"episode_info(env) returned {key!r}: {value!r}, which is not a number",
                                        "return numbers only (a 0/1 outcome as 1.0 / 0.0)") from None
        return out

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
