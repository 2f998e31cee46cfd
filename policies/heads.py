"""Action heads: map actor features to an action distribution for a Gymnasium action space.

Action tensors: int64 ``[B]`` for ``Discrete``, int64 ``[B, k]`` for ``MultiDiscrete`` (``k`` =
number of sub-actions, a multi-dimensional ``nvec`` is flattened), float32 ``[B, d]`` for ``Box``
(``d`` = flattened size; samples are unclipped, the caller clips to the bounds for the env).
Masks are boolean, True = allowed: ``[B, n]`` for ``Discrete``, ``[B, sum(nvec)]`` (the per-dim
masks concatenated) for ``MultiDiscrete``; ``Box`` ignores masks. A row whose mask allows nothing
is treated as unmasked, so it never yields NaN.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

__all__ = [
    "MaskedCategorical",
    "MultiCategorical",
    "DiagGaussian",
    "ActionHead",
    "DiscreteHead",
    "MultiDiscreteHead",
    "BoxHead",
    "make_head",
]

Mask = torch.Tensor | np.ndarray | None


def _total(terms: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of per-sub-action terms, as Python's sum adds them (0 + t0 + t1 + ...)."""
    total = sum(terms)
    if not isinstance(total, torch.Tensor):
        raise ValueError("a MultiCategorical needs at least one sub-action")
    return total


def _prepare_mask(mask: Mask, like: torch.Tensor) -> torch.Tensor | None:
    """Boolean mask on ``like``'s device; rows that allow nothing become all-True."""
    if mask is None:
        return None
    m = torch.as_tensor(mask, device=like.device).to(torch.bool)
    if m.shape != like.shape:
        raise ValueError(f"action mask has shape {tuple(m.shape)}, expected {tuple(like.shape)}")
    empty = ~m.any(dim=-1, keepdim=True)
    return m | empty


class MaskedCategorical:
    """Categorical over the last axis of ``logits`` ``[B, n]``, with an optional boolean mask."""

    def __init__(self, logits: torch.Tensor, mask: Mask = None) -> None:
        self.mask = _prepare_mask(mask, logits)
        if self.mask is not None:
            logits = logits.masked_fill(~self.mask, torch.finfo(logits.dtype).min)
        self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self.probs = self.logits.exp()

    def sample(self) -> torch.Tensor:
        """Random action, int64 ``[B]`` (argmax of p / Exp(1) noise: exact, and cheaper than multinomial)."""
        return (self.probs / torch.empty_like(self.probs).exponential_()).argmax(dim=-1)

    def mode(self) -> torch.Tensor:
        """Most probable action, int64 ``[B]``."""
        return self.logits.argmax(dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability ``[B]`` (hugely negative, but finite, for a masked action)."""
        return self.logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        """Entropy ``[B]`` over the allowed actions."""
        plogp = self.probs * self.logits
        if self.mask is not None:
            plogp = torch.where(self.mask, plogp, torch.zeros_like(plogp))
        return -plogp.sum(dim=-1)


class MultiCategorical:
    """Independent categoricals, one per sub-action; logits and mask concatenated ``[B, sum(nvec)]``."""

    def __init__(self, logits: torch.Tensor, nvec: tuple[int, ...], mask: Mask = None) -> None:
        self.nvec = tuple(int(n) for n in nvec)
        masks: Sequence[torch.Tensor | None]
        if mask is not None:
            mask = torch.as_tensor(mask, device=logits.device).to(torch.bool)
            if mask.shape != logits.shape:
                raise ValueError(
                    f"action mask has shape {tuple(mask.shape)}, expected {tuple(logits.shape)}"
                )
            masks = torch.split(mask, list(self.nvec), dim=-1)
        else:
            masks = (None,) * len(self.nvec)
        self.dists = [
            MaskedCategorical(lg, m) for lg, m in zip(torch.split(logits, list(self.nvec), dim=-1), masks)
        ]

    def sample(self) -> torch.Tensor:
        """Random action, int64 ``[B, k]``."""
        return torch.stack([d.sample() for d in self.dists], dim=-1)

    def mode(self) -> torch.Tensor:
        """Most probable action per sub-action, int64 ``[B, k]``."""
        return torch.stack([d.mode() for d in self.dists], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Joint log-probability ``[B]`` (sum over sub-actions)."""
        return _total(d.log_prob(actions[..., i]) for i, d in enumerate(self.dists))

    def entropy(self) -> torch.Tensor:
        """Joint entropy ``[B]`` (sum over sub-actions)."""
        return _total(d.entropy() for d in self.dists)


class DiagGaussian:
    """Diagonal Gaussian with ``mean`` ``[B, d]`` and ``log_std`` broadcastable to it."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor) -> None:
        self.mean = mean
        self.log_std = log_std.expand_as(mean)
        self.std = self.log_std.exp()

    def sample(self) -> torch.Tensor:
        """Random (unclipped) action ``[B, d]``."""
        return self.mean + self.std * torch.randn_like(self.mean)

    def mode(self) -> torch.Tensor:
        """The mean ``[B, d]``."""
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density ``[B]`` summed over action dimensions."""
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        """Entropy ``[B]`` summed over action dimensions."""
        return (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum(dim=-1)


Distribution = MaskedCategorical | MultiCategorical | DiagGaussian


def _linear(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActionHead(nn.Module):
    """Base class: ``dist(features, mask)``; describes actions by ``action_shape``/``action_dtype``.

    ``action_dim`` is the number of action components per sample (1, k or d); ``mask_dim`` the
    mask width (``None`` when the head takes no mask).
    """

    action_shape: tuple[int, ...]
    action_dtype: torch.dtype
    action_dim: int
    mask_dim: int | None

    @abstractmethod
    def dist(self, features: torch.Tensor, mask: Mask = None) -> Distribution:
        """The action distribution for a batch of actor features ``[B, in_dim]``."""


class DiscreteHead(ActionHead):
    """Head for ``Discrete(n)``: logits ``[B, n]``."""

    def __init__(self, in_dim: int, n: int, gain: float = 0.01) -> None:
        super().__init__()
        self.n = int(n)
        self.linear = _linear(in_dim, self.n, gain)
        self.action_shape, self.action_dtype = (), torch.int64
        self.action_dim, self.mask_dim = 1, self.n

    def dist(self, features: torch.Tensor, mask: Mask = None) -> MaskedCategorical:
        """Masked categorical over the ``n`` actions."""
        return MaskedCategorical(self.linear.forward(features), mask)


class MultiDiscreteHead(ActionHead):
    """Head for ``MultiDiscrete(nvec)``: concatenated logits ``[B, sum(nvec)]``."""

    def __init__(self, in_dim: int, nvec: tuple[int, ...], gain: float = 0.01) -> None:
        super().__init__()
        self.nvec = tuple(int(n) for n in nvec)
        self.linear = _linear(in_dim, sum(self.nvec), gain)
        self.action_shape, self.action_dtype = (len(self.nvec),), torch.int64
        self.action_dim, self.mask_dim = len(self.nvec), sum(self.nvec)

    def dist(self, features: torch.Tensor, mask: Mask = None) -> MultiCategorical:
        """Independent masked categoricals, one per entry of ``nvec``."""
        return MultiCategorical(self.linear.forward(features), self.nvec, mask)


class BoxHead(ActionHead):
    """Head for ``Box``: Gaussian mean from features, state-independent learnable ``log_std``."""

    def __init__(self, in_dim: int, dim: int, log_std_init: float = 0.0, gain: float = 0.01) -> None:
        super().__init__()
        self.mean = _linear(in_dim, int(dim), gain)
        self.log_std = nn.Parameter(torch.full((int(dim),), float(log_std_init)))
        self.action_shape, self.action_dtype = (int(dim),), torch.float32
        self.action_dim, self.mask_dim = int(dim), None

    def dist(self, features: torch.Tensor, mask: Mask = None) -> DiagGaussian:
        """Diagonal Gaussian; ``mask`` is ignored."""
        return DiagGaussian(self.mean.forward(features), self.log_std)


def make_head(in_dim: int, space: spaces.Space, log_std_init: float = 0.0) -> ActionHead:
    """The action head for a Gymnasium ``Discrete``, ``MultiDiscrete`` or ``Box`` space."""
    if isinstance(space, spaces.Discrete):
        return DiscreteHead(in_dim, int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return MultiDiscreteHead(in_dim, tuple(np.asarray(space.nvec).reshape(-1).tolist()))
    if isinstance(space, spaces.Box):
        return BoxHead(in_dim, int(np.prod(space.shape)), log_std_init=log_std_init)
    raise ValueError(
        f"unsupported action space {space!r}; supported: Discrete, MultiDiscrete, Box"
    )
