"""Gymnasium multi-agent envs as PettingZoo: `GymnasiumMultiAgent` wraps one env in the style of
lbforaging, rware or ma-gym (one `gym.Env` for the whole team) into a PettingZoo `ParallelEnv`,
which a scenario's `env(cfg)` returns:

    env=lambda cfg: GymnasiumMultiAgent(gym.make("Foraging-8x8-2p-1f-v3"))

What such an env looks like, and what the wrapper makes of it:

- observation and action spaces are a `Tuple` (or a list) of Gymnasium spaces, one per agent:
  agent i is named `agents[i]` (default `agent_0`, `agent_1`, ...) and gets space i (an env built
  on the old `gym` package needs Gymnasium spaces first);
- `step` takes one action per agent as a tuple and returns `(obs, rewards, terminated, truncated,
  info)` (Gymnasium) or `(obs, rewards, done, info)` (old Gym): obs one per agent; rewards a
  list / tuple / array with one entry per agent, or one number that every agent receives; the
  flags one bool for the team or one per agent (an agent whose flag is set leaves `agents`, and
  the wrapper steps it with a no-op action from then on);
- `reset(seed=...)` returns `(obs, info)` (or only obs; an env without a `seed` argument is seeded
  through `env.seed(seed)`).

The single `done` is split into terminated / truncated (a truncation is bootstrapped by hdppo, a
termination is not):

- a flag the env raises itself is kept: Gymnasium's `TimeLimit` (`gym.make(id,
  max_episode_steps=N)`) already reports `truncated`, and old Gym's `info["TimeLimit.truncated"]`
  is read as such;
- many of these envs end the episode at their own step limit with `done=True` and no truncation
  flag (lbforaging's `_max_episode_steps`, rware's `max_steps`, ma-gym's `_max_steps`): the
  wrapper reads that limit from the env (`env.unwrapped`) and counts the steps itself, so an end
  at the limit is a truncation, every earlier end a termination. An end exactly at the limit may
  also be the env's own (the last food eaten on the last step); give `terminal(env) -> bool`
  (`env` is the wrapped gym env) to say so, otherwise it counts as a truncation;
- `time_limit=N` cuts episodes at N steps in the wrapper (every agent still in the episode is
  truncated), `time_limit=None` says the env has no step limit to read (every end is a
  termination unless the env flags a truncation).

The gym env's `info` of each step is every agent's info; an `info["episode"]` mapping of numbers on
the last step is an episode metric hdppo reports (see `PettingZooBatch`). The wrapped env is
`wrapper.env` (for a scenario's `episode_info(env)` hook: `env.env.unwrapped`).
"""
from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from hdppo.errors import ScenarioError

# attributes of `env.unwrapped` holding the env's own step limit, in the envs this wrapper targets
LIMIT_ATTRIBUTES = ("_max_episode_steps", "max_episode_steps", "max_steps", "_max_steps")

__all__ = ["GymnasiumMultiAgent", "LIMIT_ATTRIBUTES", "env_step_limit"]


def _per_agent(space: Any, what: str, where: str) -> list[gym.Space]:
    if isinstance(space, gym.spaces.Tuple):
        return list(space.spaces)
    if isinstance(space, (list, tuple)) and all(isinstance(s, gym.Space) for s in space):
        return list(space)              # ma-gym's MultiAgent*Space is a list of spaces
    raise ScenarioError(f"the gym env's {what} space is {space!r}, not one space per agent",
                        f"wrap an env whose {what}_space is a gymnasium.spaces.Tuple (one entry per agent), "
                        "or write a PettingZoo ParallelEnv for it", where=where)


def env_step_limit(env: Any) -> int | None:
    """The step limit an env applies itself (the first of LIMIT_ATTRIBUTES on env.unwrapped), or None."""
    inner = getattr(env, "unwrapped", env)
    for name in LIMIT_ATTRIBUTES:
        value = getattr(inner, name, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def _noop(space: gym.Space) -> Any:
    """The action an agent that left the episode is stepped with (the tuple needs every agent's)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(space.start).copy()
    if isinstance(space, gym.spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    return space.sample()


class GymnasiumMultiAgent(ParallelEnv):
    """One gymnasium multi-agent env (tuple spaces, one done) as a PettingZoo ParallelEnv; see the module.

    `agents`: the agents' names (default `agent_{i}`); `time_limit`: "auto" (read the env's own
    limit), an int (the wrapper cuts episodes there) or None (no limit to read); `terminal(env)`:
    whether an end at the time limit was the env's own (a termination); `name`: the PettingZoo
    metadata name.
    """

    def __init__(self, env: gym.Env, agents: Sequence[str] | None = None, *,
                 time_limit: int | Literal["auto"] | None = "auto",
                 terminal: Callable[[gym.Env], bool] | None = None, name: str | None = None) -> None:
        spec = getattr(env, "spec", None)
        label = name or (f"gymnasium_{spec.id}" if spec is not None else f"gymnasium_{type(env).__name__}")
        where = f"GymnasiumMultiAgent({label})"
        obs_spaces = _per_agent(env.observation_space, "observation", where)
        act_spaces = _per_agent(env.action_space, "action", where)
        if len(obs_spaces) != len(act_spaces):
            raise ScenarioError(f"the gym env has {len(obs_spaces)} observation spaces but {len(act_spaces)} "
                                "action spaces", "wrap an env with one of each per agent", where=where)
        names = [f"agent_{i}" for i in range(len(obs_spaces))] if agents is None else [str(a) for a in agents]
        if len(names) != len(obs_spaces) or len(set(names)) != len(names):
            raise ScenarioError(f"agents {names} do not name the env's {len(obs_spaces)} agents one each",
                                f"pass {len(obs_spaces)} distinct names (or none for agent_0 ...)", where=where)
        self.env = env
        self.possible_agents = names
        self.agents: list[str] = []
        self._obs_spaces = dict(zip(names, obs_spaces))
        self._act_spaces = dict(zip(names, act_spaces))
        self._noops = [_noop(s) for s in act_spaces]
        self._index = {a: i for i, a in enumerate(names)}
        if time_limit == "auto":
            self.env_limit = env_step_limit(env)
            self.wrapper_limit: int | None = None
        elif time_limit is None:
            self.env_limit = self.wrapper_limit = None
        elif isinstance(time_limit, (int, np.integer)) and not isinstance(time_limit, bool) and time_limit >= 1:
            self.env_limit = env_step_limit(env)
            self.wrapper_limit = int(time_limit)
        else:
            raise ScenarioError(f"time_limit={time_limit!r}", 'pass "auto", an int >= 1 or None', where=where)
        gym_limit = getattr(spec, "max_episode_steps", None)     # gym.make's TimeLimit flags truncation itself
        limits = [x for x in (self.env_limit, self.wrapper_limit, gym_limit) if x]
        self.time_limit: int | None = min(limits) if limits else None   # where episodes are cut, for reading
        self.terminal = terminal
        self.metadata = {"name": label, "render_modes": list(getattr(env, "metadata", {}).get("render_modes", []))}
        self.render_mode = getattr(env, "render_mode", None)
        self._t = 0
        self._checked = False        # Gymnasium's passive checker looks at the first step only
        try:
            self._reset_takes_seed = "seed" in inspect.signature(env.reset).parameters
        except (TypeError, ValueError):
            self._reset_takes_seed = True

    def observation_space(self, agent: str) -> gym.Space:      # the same object per agent, as PettingZoo asks
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self._act_spaces[agent]

    def _obs(self, raw: Any) -> dict[str, Any]:
        out = {}
        for agent, ob in zip(self.possible_agents, raw):
            space = self._obs_spaces[agent]
            if isinstance(space, gym.spaces.Box):
                ob = np.asarray(ob, dtype=space.dtype).reshape(space.shape)
            out[agent] = ob
        return out

    def _flags(self, value: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(value, dtype=bool).reshape(-1), (len(self.possible_agents),)).copy()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if self._reset_takes_seed:
            out = self.env.reset(seed=seed, options=options)
        else:                                   # an old Gym env: seed(), then reset()
            if seed is not None and hasattr(self.env, "seed"):
                self.env.seed(seed)
            out = self.env.reset()
        raw, info = out if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict) else (out, {})
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._obs(raw), {a: dict(info) for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        live = list(self.agents)
        joint = tuple(actions[a] if a in actions and a in live else self._noops[i]
                      for i, a in enumerate(self.possible_agents))
        if self._checked:
            out = self.env.step(joint)
        else:
            with warnings.catch_warnings():  # list rewards are this API, not a fault (passive env checker)
                warnings.filterwarnings("ignore", message=r".*reward returned by `step\(\)` must be")
                out = self.env.step(joint)
            self._checked = True
        if len(out) == 5:
            raw, rew, term_raw, trunc_raw, info = out
        else:                                   # old Gym: (obs, rewards, done, info)
            raw, rew, term_raw, info = out
            trunc_raw = False
        info = info if isinstance(info, dict) else {}
        self._t += 1
        term, trunc = self._split(self._flags(term_raw), self._flags(trunc_raw), info)
        n = len(self.possible_agents)
        rewards = np.broadcast_to(np.asarray(rew, dtype=np.float64).reshape(-1), (n,))
        obs = self._obs(raw)
        idx = self._index
        out_obs = {a: obs[a] for a in live}
        out_rew = {a: float(rewards[idx[a]]) for a in live}
        out_term = {a: bool(term[idx[a]]) for a in live}
        out_trunc = {a: bool(trunc[idx[a]]) for a in live}
        self.agents = [a for a in live if not (out_term[a] or out_trunc[a])]
        return out_obs, out_rew, out_term, out_trunc, {a: dict(info) for a in live}

    def _split(self, term: np.ndarray, trunc: np.ndarray, info: dict) -> tuple[np.ndarray, np.ndarray]:
        """The env's end flags as (terminated, truncated) per agent; see the module docstring."""
        if info.get("TimeLimit.truncated"):        # old Gym's TimeLimit: done=True, cut by the limit
            trunc |= term
            term[:] = False
        elif self.env_limit is not None and self._t >= self.env_limit and "TimeLimit.truncated" not in info:
            ended = term & ~trunc                   # the env ended it at its own limit: a truncation...
            if ended.any() and not (self.terminal is not None and self.terminal(self.env)):
                trunc |= ended                      # ...unless terminal(env) says the env really ended
                term &= ~ended
        if self.wrapper_limit is not None and self._t >= self.wrapper_limit:
            trunc |= ~term                           # the wrapper's own limit: everyone still in is cut
        trunc &= ~term
        return term, trunc

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
