"""One layer of a hierarchy as a PettingZoo ParallelEnv; the other layers act with fixed policies.

Agents are the layer's decision slots (units, nodes, or parent/child pairs). A `step` covers one
decision interval of the layer: the env advances until the layer decides again or the episode
ends. Rewards are the semi-MDP transition rewards (`sum gamma^i r` over the interval); infos carry
the transition's `discount` (gamma^k') so SMDP-aware learners can bootstrap correctly.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from hdppo.team.controllers import scripted_policy, uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.interfaces import Decision, StepResult
from hdppo.team.scenario import Scenario


class LayerView(ParallelEnv):
    """A ParallelEnv over layer `layer` of one copy of the scenario (see module docstring)."""

    metadata = {"name": "hdppo_layer_view", "render_modes": []}

    def __init__(self, scenario: Scenario, layer: str, cfg: Any = None,
                 policies: dict[str, Callable[[Decision], np.ndarray]] | None = None, seed: int | None = None) -> None:
        self.hier = HierarchyEnv(scenario, cfg, n_envs=1, seed=seed, autoreset=False)
        names = [inf.name for inf in self.hier.info]
        if layer not in names:
            from hdppo.errors import ScenarioError
            raise ScenarioError(f"layer {layer!r} is not a layer of scenario {scenario.name!r}",
                                f"use one of {names}")
        self.layer = names.index(layer)
        self.info = self.hier.info[self.layer]
        self.render_mode = None
        # per_child padding slots (a smaller last squad) never act, so they are not agents
        struct = self.hier.struct[self.layer] if self.info.choice == "per_child" else None
        self._valid = (np.ones(self.info.n_slots, bool) if struct is None else struct[0].reshape(-1).copy())
        self.possible_agents = [self.info.slot_names[i] for i in np.flatnonzero(self._valid)]
        self._index = {a: self.info.slot_names.index(a) for a in self.possible_agents}
        self.agents: list[str] = []
        self._fixed = {}
        for inf, spec in zip(self.hier.info, self.hier.specs):
            given = (policies or {}).get(inf.name)
            own_seed = None if seed is None else seed + 31 * inf.index
            if given is not None:
                self._fixed[inf.index] = given
            elif spec.scripted is not None:
                self._fixed[inf.index] = scripted_policy(inf, spec.scripted, own_seed)
            else:
                self._fixed[inf.index] = uniform_policy(inf, own_seed)
        self._gen: Generator[Decision | None, np.ndarray | None, StepResult] | None = None
        self._done = True
        bottom = self.layer == len(self.hier.info) - 1
        env_mask = self.hier.env.action_mask if bottom else None
        goal_masked = not bottom and self.hier.specs[self.layer].goal_mask is not None
        self._masked = env_mask is not None or goal_masked
        self._obs_space: gym.Space = self.info.obs_space
        if self._masked:           # PettingZoo's convention for action masks: a dict observation
            if env_mask is not None:
                n = env_mask.shape[-1]
            else:
                goals = self.info.action_space
                assert isinstance(goals, gym.spaces.Discrete)      # goal_mask needs one; the scenario's load checks it
                n = int(goals.n)
            self._obs_space = gym.spaces.Dict({"observation": self.info.obs_space,
                                               "action_mask": gym.spaces.Box(0, 1, (n,), np.int8)})
        self._last_mask: np.ndarray | None = None

    def observation_space(self, agent: str):
        return self._obs_space

    def action_space(self, agent: str):
        return self.info.action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.hier.reset(seed)
        self._gen, self._done = None, False
        self._advance_to_decision(None)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        s = self.info.n_slots
        rew = np.zeros(s, dtype=np.float64)
        disc = np.ones(s, dtype=np.float64)
        term = np.zeros(s, dtype=bool)
        trunc = np.zeros(s, dtype=bool)
        acting = list(self.agents)
        answer = self._actions_array(actions)
        ended = self._advance_to_decision(answer, rew, disc, term, trunc)
        idx = self._index
        rewards = {a: float(rew[idx[a]]) for a in acting}
        terms = {a: bool(term[idx[a]]) for a in acting}
        truncs = {a: bool(trunc[idx[a]]) for a in acting}
        infos = {a: {"discount": float(disc[idx[a]])} for a in acting}
        if ended:
            for a in acting:  # the episode ended: everyone who acted is done
                if not terms[a] and not truncs[a]:
                    truncs[a] = True
        obs = self._observations()
        for a in acting:
            if a not in obs:
                obs[a] = self._one_obs(idx[a])
        return obs, rewards, terms, truncs, infos

    def _observations(self) -> dict:
        if self._done:
            return {}
        return {a: self._one_obs(self._index[a]) for a in self.agents}

    def _one_obs(self, i: int):
        if self._masked:
            assert self._last_mask is not None    # a masked layer's decisions carry a mask
            return {"observation": self._last_obs[i].copy(), "action_mask": self._last_mask[i].astype(np.int8)}
        return self._last_obs[i].copy()

    def state(self):
        return self.hier.env.state()[0]

    def close(self) -> None:
        self.hier.close()

    # ---- internals -------------------------------------------------------------------------
    def _actions_array(self, actions: dict) -> np.ndarray:
        space = self.info.action_space
        shape = (1, self.info.n_slots) + tuple(space.shape or ())
        out = np.zeros(shape, dtype=space.dtype if space.dtype is not None else np.int64)
        for a, act in actions.items():
            if a in self.agents:
                out[0, self._index[a]] = act
        return out

    def _advance_to_decision(self, answer, rew=None, disc=None, term=None, trunc=None) -> bool:
        """Answer the pending decision with `answer` (None at reset), then run the hierarchy until this
        layer decides again (returns False) or the episode ends (returns True), collecting closed
        transitions of this layer into rew/disc/term/trunc."""
        gen, fresh, reply = self._gen, self._gen is None, answer
        while True:
            if gen is None:
                gen, fresh = self.hier.step_iter(), True
            try:
                d = next(gen) if fresh else gen.send(reply)
            except StopIteration as stop:
                gen = self._gen = None
                result: StepResult = stop.value
                if rew is not None:
                    step = result.layers[self.layer]
                    c = step.closed[0]
                    rew[c], disc[c] = step.reward[0][c], step.discount[0][c]
                    term[c] |= step.terminal[0][c]
                    trunc[c] |= step.truncated[0][c]
                if result.done[0]:
                    self._done, self.agents = True, []
                    return True
                continue
            fresh = False
            assert d is not None                  # step_iter() without pause yields only decisions
            if d.layer == self.layer and d.mask.any():
                self._gen = gen
                self.agents = [self.info.slot_names[i] for i in np.flatnonzero(d.mask[0] & self._valid)]
                self._last_obs = d.obs[0]
                self._last_mask = None if d.action_mask is None else d.action_mask[0]
                return False
            reply = np.asarray(self._fixed[d.layer](d))
