"""How a checkpointed layer of a loaded team acts: its actor (torch).

Only the actor half of a checkpoint is used: role embeddings are looked up per slot, and a
centralized critic (or any critic) is never run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from hdppo.runtime.action_space import to_space
from hdppo.team.interfaces import Decision, LayerInfo

if TYPE_CHECKING:
    from hdppo.policies.mlp import ActorCritic


@dataclass
class LoadedPolicy:
    """A layer's checkpointed actor-critic and what acting with it needs."""

    module: ActorCritic
    roles: np.ndarray | None          # [S] role per slot, None without role embeddings
    meta: dict
    path: str


def load_policy(info: LayerInfo, path: str) -> LoadedPolicy:
    """A layer's policy from its checkpoint folder, refused if built for another obs size or action space."""
    from hdppo.engine.learner import load_policy as load_checkpointed
    module, lc, meta = load_checkpointed(info, path)
    return LoadedPolicy(module, info.slot_roles if lc.roles else None, meta, str(path))


def policy_actor(info: LayerInfo, loaded: LoadedPolicy, deterministic: bool):
    """Actions of every slot of a decision from the checkpoint's actor (mode, or a sample)."""
    def act(d: Decision) -> np.ndarray:
        E, S, D = d.obs.shape
        obs = torch.from_numpy(np.ascontiguousarray(d.obs, dtype=np.float32).reshape(E * S, D))
        mask = None if d.action_mask is None else torch.from_numpy(np.asarray(d.action_mask).reshape(E * S, -1))
        roles = None if loaded.roles is None else torch.from_numpy(np.tile(loaded.roles, E))
        with torch.no_grad():
            dist = loaded.module.distribution(obs, mask, roles)
            a = (dist.mode() if deterministic else dist.sample()).numpy()
        return to_space(a.reshape((E, S) + a.shape[1:]), info.action_space)
    return act


