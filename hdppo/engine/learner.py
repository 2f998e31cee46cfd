"""What workers and servers share to learn a layer: its policy, batches, the PPO minibatch loss.

Gradients mode runs `minibatch_loss` in the workers and averages gradients on the server;
experience mode runs the same function on the server over the workers' batches.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from hdppo.engine.config import LayerConfig
from hdppo.engine.interface import obs_parts
from hdppo.engine.messages import LayerInfo
from hdppo.engine.ppo import PPOLossTerms, ppo_loss
from hdppo.policies.factory import PolicySpec, make_policy

if TYPE_CHECKING:
    from hdppo.policies.mlp import ActorCritic

BATCH_KEYS = ("obs", "actions", "logp", "values", "advantages", "returns", "action_mask", "roles", "critic_obs")


def policy_spec(info: LayerInfo, lc: LayerConfig) -> PolicySpec:
    """The policy architecture of a layer from its config."""
    n_roles = int(info.slot_roles.max()) + 1 if lc.roles else 0
    return PolicySpec(kind=lc.policy, hidden=tuple(lc.hidden), activation=lc.activation, n_roles=n_roles,
                      centralized=lc.centralized, critic_obs_dim=3 * info.obs_dim if lc.centralized else None,
                      value_norm=lc.value_norm)


def build_policy(info: LayerInfo, lc: LayerConfig, seed: int) -> ActorCritic:
    """A layer's actor-critic, initialised from `seed` (servers and workers build the same one)."""
    spec = policy_spec(info, lc)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_policy(info.obs_dim, info.action_space, spec, spec.critic_obs_dim)


def policy_meta(info: LayerInfo, lc: LayerConfig) -> dict:
    """What a checkpoint records to rebuild a layer's policy and to refuse a mismatching one."""
    spec = policy_spec(info, lc)
    return {"layer": info.name, "obs_dim": info.obs_dim, "action_space": repr(info.action_space),
            "obs_parts": obs_parts(info),
            "policy": {"kind": spec.kind, "hidden": list(spec.hidden), "activation": spec.activation,
                       "n_roles": spec.n_roles, "centralized": spec.centralized,
                       "critic_obs_dim": spec.critic_obs_dim, "value_norm": spec.value_norm}}


def policy_config(meta: dict) -> LayerConfig:
    """The LayerConfig that rebuilds a checkpoint's policy (from its `policy_meta`); checkpoints
    written before value_norm existed rebuild without it."""
    p = meta["policy"]
    return LayerConfig(policy=p["kind"], hidden=tuple(p["hidden"]), activation=p["activation"],
                       roles=p["n_roles"] > 0, centralized=p["centralized"], value_norm=p.get("value_norm", False))


def load_policy(info: LayerInfo, path: str) -> tuple[ActorCritic, LayerConfig, dict]:
    """A layer's checkpointed policy (eval mode), its LayerConfig and the checkpoint's meta; refused
    if the checkpoint was built for another observation size or action space."""
    from hdppo.engine.checkpoint import check_compatible, load_checkpoint, load_module_state
    tensors, meta = load_checkpoint(path)
    check_compatible(meta, {"obs_dim": info.obs_dim, "action_space": repr(info.action_space)},
                     f"checkpoint {path} for layer {info.name!r}")
    lc = policy_config(meta)
    policy = build_policy(info, lc, 0)
    load_module_state(policy, tensors)
    policy.eval()
    return policy, lc, meta


def critic_obs(obs: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Centralized critic input per slot [E, S, 3D]: own obs, mean and max over the layer's living slots."""
    m = alive[..., None]
    count = np.maximum(alive.sum(axis=1, keepdims=True), 1)[..., None]
    mean = np.where(m, obs, 0.0).sum(axis=1, keepdims=True) / count
    mx = np.where(m, obs, -np.inf).max(axis=1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    E, S, D = obs.shape
    return np.concatenate([obs, np.broadcast_to(mean, (E, S, D)), np.broadcast_to(mx, (E, S, D))],
                          axis=2).astype(np.float32)


@dataclass
class Batch:
    """Flat transitions of one layer from one worker; optional fields are None when unused."""

    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    values: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    action_mask: np.ndarray | None = None
    roles: np.ndarray | None = None
    critic_obs: np.ndarray | None = None
    stats: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    def take(self, idx: np.ndarray) -> Batch:
        kw: dict[str, Any] = {k: (None if getattr(self, k) is None else getattr(self, k)[idx]) for k in BATCH_KEYS}
        return Batch(**kw)

    @staticmethod
    def concat(batches: list[Batch]) -> Batch:
        kw: dict[str, Any] = {}
        for k in BATCH_KEYS:
            parts = [getattr(b, k) for b in batches]
            kw[k] = None if parts[0] is None else np.concatenate(parts)
        return Batch(**kw)


def minibatch_loss(policy: ActorCritic, mb: Batch, lc: LayerConfig, ent_coef: float) -> PPOLossTerms:
    """The PPO loss of a minibatch under the current parameters (with gradients). With value_norm the
    value loss compares values and returns in the critic's standardised units."""
    logp, entropy, values = policy.evaluate(mb.obs, mb.actions, mask=mb.action_mask, roles=mb.roles,
                                            critic_obs=mb.critic_obs)
    t = lambda x: torch.as_tensor(x, dtype=torch.float32)  # noqa: E731
    norm = getattr(policy, "normalize_value", lambda v: v)
    return ppo_loss(logp, t(mb.logp), t(mb.advantages), norm(values), norm(t(mb.values)), norm(t(mb.returns)), entropy,
                    clip_eps=lc.clip_eps, vf_coef=lc.vf_coef, ent_coef=ent_coef, clip_vloss=lc.clip_vloss,
                    normalize_advantages=lc.norm_adv)


def minibatches(n: int, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A shuffled split of range(n) into `count` near-equal minibatches (some may be empty)."""
    perm = rng.permutation(n)
    return np.array_split(perm, count)


Params = nn.Module | Sequence[torch.Tensor]     # a module, or its parameters() as a list (kept by hot loops)


def _params(p: Params) -> Iterable[torch.Tensor]:
    return p.parameters() if isinstance(p, nn.Module) else p


def flat_params(module: Params) -> np.ndarray:
    """The parameters as one float32 vector (a fresh array)."""
    return torch.nn.utils.parameters_to_vector(_params(module)).detach().cpu().numpy().astype(np.float32, copy=False)


def load_flat_params(module: Params, flat: np.ndarray) -> None:
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.as_tensor(flat, dtype=torch.float32), _params(module))


def flat_grad(module: Params) -> np.ndarray:
    """The parameters' gradients as one float32 vector (zeros where a parameter has none)."""
    parts = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in _params(module)]
    return torch.cat(parts).detach().cpu().numpy().astype(np.float32, copy=False)


def action_histogram(actions: np.ndarray, space: gym.Space) -> np.ndarray | None:
    """Normalised action counts for Discrete spaces (for divergence diagnostics)."""
    if not isinstance(space, gym.spaces.Discrete) or actions.size == 0:
        return None
    return np.bincount(actions.reshape(-1).astype(np.int64) - int(space.start), minlength=int(space.n)) / actions.size
