"""MLP actor-critic with optional role embedding and optional centralized critic."""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from .heads import ActionHead, Distribution, Mask, make_head

__all__ = ["ActorCritic", "ACTIVATIONS"]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}

Array = torch.Tensor | np.ndarray


def _forward(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Run a Sequential calling each module's forward directly (skips per-call hook machinery)."""
    for m in seq:
        x = m.forward(x)
    return x


def _mlp(in_dim: int, hidden: tuple[int, ...], activation: str) -> tuple[nn.Sequential, int]:
    """Hidden layers (orthogonal init, gain sqrt(2)) and their output width."""
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        lin = nn.Linear(width, int(h))
        nn.init.orthogonal_(lin.weight, math.sqrt(2.0))
        nn.init.zeros_(lin.bias)
        layers += [lin, ACTIVATIONS[activation]()]
        width = int(h)
    return nn.Sequential(*layers), width


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over a flat observation, batched over ``B`` samples.

    ``n_roles > 0`` adds a learned role embedding (``role_dim`` wide, one table for the actor and
    one for the critic) concatenated to each network's input; roles are int64 ``[B]``.
    ``critic_obs_dim`` makes the critic centralized: it reads ``critic_obs`` ``[B, critic_obs_dim]``
    (e.g. the layer's joint state) instead of the actor observation.
    ``value_norm`` makes the critic's head predict returns standardised by a running mean and std
    that the trainer keeps in the non-trainable parameters ``value_mean`` / ``value_std`` (so they
    travel and are saved with the weights); ``value()`` always answers in return units.
    """

    def __init__(
        self,
        obs_dim: int,
        action_space: spaces.Space,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        n_roles: int = 0,
        critic_obs_dim: int | None = None,
        role_dim: int = 8,
        log_std_init: float = 0.0,
        value_norm: bool = False,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; known: {', '.join(sorted(ACTIVATIONS))}"
            )
        self.obs_dim = int(obs_dim)
        self.action_space = action_space
        self.n_roles = int(n_roles)
        self.role_dim = int(role_dim) if self.n_roles > 0 else 0
        self.critic_obs_dim = None if critic_obs_dim is None else int(critic_obs_dim)
        self.centralized = self.critic_obs_dim is not None

        if self.n_roles > 0:
            self.actor_roles = nn.Embedding(self.n_roles, self.role_dim)
            self.critic_roles = nn.Embedding(self.n_roles, self.role_dim)
        critic_in = self.critic_obs_dim if self.critic_obs_dim is not None else self.obs_dim
        self.actor_body, actor_out = _mlp(self.obs_dim + self.role_dim, tuple(hidden), activation)
        self.critic_body, critic_out = _mlp(critic_in + self.role_dim, tuple(hidden), activation)
        self.head: ActionHead = make_head(actor_out, action_space, log_std_init=log_std_init)
        self.value_out = nn.Linear(critic_out, 1)
        nn.init.orthogonal_(self.value_out.weight, 1.0)
        nn.init.zeros_(self.value_out.bias)
        self.value_norm = bool(value_norm)
        if self.value_norm:
            self.value_mean = nn.Parameter(torch.zeros(()), requires_grad=False)
            self.value_std = nn.Parameter(torch.ones(()), requires_grad=False)

    # ------------------------------------------------------------------ inputs

    def _tensor(self, x: Array, dtype: torch.dtype | None = None) -> torch.Tensor:
        ref = self.value_out.weight
        return torch.as_tensor(x, dtype=dtype or ref.dtype, device=ref.device)

    def _with_role(self, x: torch.Tensor, roles: Array | None, table: str) -> torch.Tensor:
        if self.n_roles == 0:
            if roles is not None:
                raise ValueError("roles given to a policy built with n_roles=0")
            return x
        if roles is None:
            raise ValueError(f"this policy has n_roles={self.n_roles}: pass roles (int64 [B])")
        emb = getattr(self, table)(self._tensor(roles, torch.int64))
        return torch.cat([x, emb], dim=-1)

    def _critic_input(self, obs: Array, critic_obs: Array | None) -> torch.Tensor:
        if self.centralized:
            if critic_obs is None:
                raise ValueError("this policy has a centralized critic: pass critic_obs")
            return self._tensor(critic_obs)
        if critic_obs is not None:
            raise ValueError("critic_obs given to a policy built without critic_obs_dim")
        return self._tensor(obs)

    # ------------------------------------------------------------------ forward

    def distribution(self, obs: Array, mask: Mask = None, roles: Array | None = None) -> Distribution:
        """The action distribution for observations ``[B, obs_dim]``."""
        x = self._with_role(self._tensor(obs), roles, "actor_roles")
        return self.head.dist(_forward(self.actor_body, x), mask)

    def value(self, obs: Array, roles: Array | None = None, critic_obs: Array | None = None) -> torch.Tensor:
        """State values ``[B]`` in return units (keeps the graph; wrap in ``torch.no_grad()`` for rollouts)."""
        x = self._with_role(self._critic_input(obs, critic_obs), roles, "critic_roles")
        v = self.value_out.forward(_forward(self.critic_body, x)).squeeze(-1)
        return v * self.value_std + self.value_mean if self.value_norm else v

    def normalize_value(self, v: torch.Tensor) -> torch.Tensor:
        """Return-unit values in the critic head's standardised units (identity without value_norm)."""
        return (v - self.value_mean) / self.value_std if self.value_norm else v

    @torch.no_grad()
    def act(
        self,
        obs: Array,
        mask: Mask = None,
        roles: Array | None = None,
        critic_obs: Array | None = None,
        deterministic: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B], value [B])`` for a batch, without gradients."""
        dist = self.distribution(obs, mask, roles)
        action = dist.mode() if deterministic else dist.sample()
        return action, dist.log_prob(action), self.value(obs, roles, critic_obs)

    def evaluate(
        self,
        obs: Array,
        actions: Array,
        mask: Mask = None,
        roles: Array | None = None,
        critic_obs: Array | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp [B], entropy [B], value [B])`` of given actions, with gradients."""
        dist = self.distribution(obs, mask, roles)
        if self.head.action_dtype.is_floating_point:
            a = self._tensor(actions)
            a = a.reshape(a.shape[0], -1)
        else:
            a = self._tensor(actions, torch.int64)
        return dist.log_prob(a), dist.entropy(), self.value(obs, roles, critic_obs)
