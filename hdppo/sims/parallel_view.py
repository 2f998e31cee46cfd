"""One copy of a native BatchedEnv behind PettingZoo's parallel dict API: a scenario's `env(cfg)`.

A native scenario steps its copies as arrays (`batched_env`); PettingZoo's API test and anyone who
wants a plain ParallelEnv get this view of a batch with one copy instead of a second simulator.
Given its scenario's `scene` function, the view also renders (render_mode="rgb_array").
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from hdppo.sims.base import BatchedEnv


class BatchParallelEnv(ParallelEnv):
    """A ParallelEnv over copy 0 of `batch` (built with n_envs=1). Observations are the batch's flat
    Boxes; with `mask_in_infos` the legal actions are in `infos[agent]["action_mask"]` (int8).

    With `scene` (the scenario's `scene(env) -> Scene`), `render()` draws it, and the team in
    `overlay` over it (`hdppo render` sets that), as an RGB array for render_mode="rgb_array"; a
    subclass that renders lists "rgb_array" in its `metadata["render_modes"]`."""

    metadata = {"name": "hdppo_batch_v0", "render_modes": []}

    def __init__(self, batch: BatchedEnv, mask_in_infos: bool = False, render_mode: str | None = None,
                 scene: Callable[[Any], Any] | None = None) -> None:
        if batch.n_envs != 1:
            raise ValueError(f"a BatchParallelEnv views one copy; the batch has n_envs={batch.n_envs}")
        self.batch = batch
        self.render_mode = render_mode
        self.scene = scene
        self.overlay: Any = None      # the team drawn over the scene (an Overlay; hdppo render sets it)
        self.mask_in_infos = mask_in_infos and batch.action_mask is not None
        self.possible_agents = list(batch.units)
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.state_space = batch.state_space

    def observation_space(self, agent: str) -> gym.spaces.Box:
        return self.batch.obs_space

    def action_space(self, agent: str) -> gym.Space:
        return self.batch.action_space

    def _infos(self, agents: Sequence[str]) -> dict:
        mask = self.batch.action_mask
        if not self.mask_in_infos or mask is None:
            return {a: {} for a in agents}
        return {a: {"action_mask": mask[0, self._index[a]].astype(np.int8)} for a in agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.batch.reset(seed)
        self.agents = list(self.possible_agents)
        return {a: self.batch.obs[0, i].copy() for a, i in self._index.items()}, self._infos(self.agents)

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        live = self.agents
        if not live:
            return {}, {}, {}, {}, {}
        act = np.zeros((1, len(self.possible_agents)), np.int64)
        for agent, a in actions.items():
            act[0, self._index[agent]] = int(a)
        res = self.batch.step(act)
        idx = [self._index[a] for a in live]
        obs = {a: self.batch.obs[0, i].copy() for a, i in zip(live, idx)}
        rew = {a: float(res.rewards[0, i]) for a, i in zip(live, idx)}
        term = {a: bool(res.terminated[0, i]) for a, i in zip(live, idx)}
        trunc = {a: bool(res.truncated[0, i]) for a, i in zip(live, idx)}
        infos = self._infos(live)
        self.agents = [a for a, i in zip(live, idx) if self.batch.alive[0, i]]
        return obs, rew, term, trunc, infos

    def state(self) -> np.ndarray:
        return self.batch.state()[0]

    def render(self) -> np.ndarray | None:
        """An RGB frame [H, W, 3] of the scene for render_mode="rgb_array", else None."""
        if self.scene is None:
            return None
        from hdppo.sims.scene import render_frame
        return render_frame(self, self.scene(self), self.overlay)
