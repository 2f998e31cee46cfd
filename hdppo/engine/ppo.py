"""Pure PPO maths: semi-MDP GAE, the clipped PPO loss with named terms, diagnostics, schedules.

Nothing here knows about workers, layers or environments; every function is tested against a
plain reference loop in ``tests/test_ppo_math.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

__all__ = [
    "smdp_gae",
    "PPOLossTerms",
    "ppo_loss",
    "normalize_advantages",
    "explained_variance",
    "linear_schedule",
    "kl_early_stop",
    "EpochLoop",
]


def smdp_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    discounts: np.ndarray,
    valid: np.ndarray,
    closed: np.ndarray,
    lam: float,
    last_values: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE over the sparse decision sequence of every slot of a ``[T, *batch]`` rollout.

    Each batch element (e.g. one ``(env, slot)`` pair) has its own decision sequence along
    axis 0; rows where it made no decision are skipped.

    Args:
        rewards: transition reward stored at the row where the transition started
            (for a layer with interval k: ``sum_{i<k} gamma^i r_{t+i}``; on truncation the caller
            adds ``gamma^k' * V(final obs)`` here and passes discount 0).
        values: ``V(s)`` at the row where the transition started.
        discounts: discount to the next decision of the same slot (``gamma^k``, ``gamma^k'`` if
            the interval was cut short, ``0`` if terminal/truncated).
        valid: True where the slot made a decision at that row.
        closed: True where that transition has finished (reward and discount known). A valid
            but not closed entry is *open*; it can only be the last valid entry of its slot.
        lam: the GAE lambda.
        last_values: ``[*batch]`` value of each slot's next decision state after the rollout, for
            a closed entry with no later valid entry (CleanRL's ``next_value``). Without it such an
            entry must have discount 0 (its episode ended); otherwise a ValueError is raised, since
            bootstrapping a continuing transition from 0 biases every return.

    Returns:
        ``(advantages, returns)`` as float32 arrays of the input shape. On valid & closed
        entries ``returns = advantages + values``; every other entry is 0.

    Semantics:
        * A closed entry bootstraps from the value of the next valid entry of its slot (closed
          or open) and chains the advantage of that entry only if it is closed; an open entry
          contributes no advantage and cuts the chain (as at the end of a flat PPO rollout).
        * A closed entry with no later valid entry bootstraps from ``last_values`` (0 when not
          given, which is only allowed where its discount is 0).
        * ``closed`` without ``valid`` is ignored; the contents of invalid entries are never read
          (they may hold garbage or NaN).
    """
    rewards = np.asarray(rewards)
    shape = rewards.shape
    arrays = {"values": values, "discounts": discounts, "valid": valid, "closed": closed}
    for name, arr in arrays.items():
        if np.shape(arr) != shape:
            raise ValueError(f"smdp_gae: {name} has shape {np.shape(arr)}, rewards {shape}")
    if len(shape) < 1:
        raise ValueError("smdp_gae: inputs need a leading time axis")

    valid_b = np.asarray(valid, dtype=bool)
    done_b = valid_b & np.asarray(closed, dtype=bool)
    open_b = valid_b & ~done_b
    with np.errstate(invalid="ignore"):  # garbage in unused entries is zeroed, never read
        r = np.where(done_b, np.asarray(rewards, dtype=np.float64), 0.0)
        v = np.where(valid_b, np.asarray(values, dtype=np.float64), 0.0)
        d = np.where(done_b, np.asarray(discounts, dtype=np.float64), 0.0)

    batch = shape[1:]
    if last_values is None:
        has_next = np.flip(np.logical_or.accumulate(np.flip(valid_b, 0), axis=0), 0)  # a valid entry at or after t
        later = np.concatenate([has_next[1:], np.zeros((1,) + batch, bool)]) if shape[0] else has_next
        dangling = done_b & ~later & (d != 0)
        if dangling.any():
            raise ValueError(
                f"smdp_gae: {int(dangling.sum())} closed transition(s) with discount > 0 have no next decision "
                "to bootstrap from; pass last_values (the value of each slot's next decision state)")
        next_value = np.zeros(batch, dtype=np.float64)
    else:
        if np.shape(last_values) != batch:
            raise ValueError(f"smdp_gae: last_values has shape {np.shape(last_values)}, expected {batch}")
        next_value = np.asarray(last_values, dtype=np.float64).copy()
    next_adv = np.zeros(batch, dtype=np.float64)
    adv = np.zeros(shape, dtype=np.float64)
    for t in range(shape[0] - 1, -1, -1):
        done_t, open_t = done_b[t], open_b[t]
        delta = r[t] + d[t] * next_value - v[t]
        a_t = np.where(done_t, delta + d[t] * lam * next_adv, 0.0)
        adv[t] = a_t
        next_adv = np.where(done_t, a_t, np.where(open_t, 0.0, next_adv))
        next_value = np.where(valid_b[t], v[t], next_value)

    returns = np.where(done_b, adv + v, 0.0)
    return adv.astype(np.float32), returns.astype(np.float32)


class PPOLossTerms(dict[str, torch.Tensor]):
    """Named terms of a minibatch loss, as TorchRL's losses return them: every ``loss_*`` entry keeps
    its graph and is summed into :attr:`loss`; every other entry is a detached diagnostic. Entries
    read as attributes too (``terms.v_loss``)."""

    @property
    def loss(self) -> torch.Tensor:
        """The sum of the ``loss_*`` entries, in the order they were added (with their graph)."""
        parts = [v for k, v in self.items() if k.startswith("loss_")]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    def __getattr__(self, name: str) -> torch.Tensor:
        if name.startswith("_") or name not in self:
            raise AttributeError(name)
        return self[name]

    def scalars(self) -> dict[str, float]:
        """``loss`` and every entry as Python floats, for logging (one device sync per term)."""
        with torch.no_grad():
            out = {"loss": float(self.loss)}
        out.update((k, float(v.detach())) for k, v in self.items())
        return out


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Advantages normalised to zero mean and unit (unbiased) std.

    A minibatch of one element is returned unchanged: its std is undefined and subtracting its
    mean would zero the only learning signal.
    """
    if advantages.numel() <= 1:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def ppo_loss(
    new_logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    vf_coef: float = 0.5,
    ent_coef: float = 0.01,
    clip_vloss: bool = False,
    vclip_eps: float | None = None,
    normalize_advantages: bool = True,
) -> PPOLossTerms:
    """Clipped-surrogate PPO loss on one minibatch, as named terms (see :class:`PPOLossTerms`).

    ``loss = pg_loss + vf_coef * v_loss - ent_coef * mean(entropy)``, the sum of the terms
    ``loss_pg``, ``loss_value`` and ``loss_entropy``; the diagnostics are ``pg_loss``, ``v_loss``,
    ``entropy``, ``approx_kl`` and ``clipfrac``. Here ``v_loss`` is ``0.5 * (v - ret)^2`` averaged
    (or, with ``clip_vloss``, the elementwise max of the unclipped and the ``vclip_eps``-clipped
    squared errors, as in PPO2; ``vclip_eps`` defaults to ``clip_eps``). ``approx_kl`` is the mean
    of ``(ratio - 1) - log(ratio)``; ``clipfrac`` the fraction of samples with
    ``|ratio - 1| > clip_eps``. All inputs share one shape (any shape; means are taken over all
    elements).
    """
    adv = advantages.detach()
    if normalize_advantages:
        adv = _normalize(adv)
    logratio = new_logp - old_logp.detach()
    ratio = logratio.exp()
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    pg_loss = torch.max(pg1, pg2).mean()

    returns = returns.detach()
    v_err = (new_values - returns).pow(2)
    if clip_vloss:
        eps_v = clip_eps if vclip_eps is None else vclip_eps
        old_v = old_values.detach()
        v_clipped = old_v + torch.clamp(new_values - old_v, -eps_v, eps_v)
        v_err = torch.max(v_err, (v_clipped - returns).pow(2))
    v_loss = 0.5 * v_err.mean()

    ent = entropy.mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_eps).to(ratio.dtype).mean()
    # loss_pg + loss_value + loss_entropy is pg_loss + vf_coef * v_loss - ent_coef * ent, bit for bit
    return PPOLossTerms(
        loss_pg=pg_loss,
        loss_value=vf_coef * v_loss,
        loss_entropy=-ent_coef * ent,
        pg_loss=pg_loss.detach(),
        v_loss=v_loss.detach(),
        entropy=ent.detach(),
        approx_kl=approx_kl,
        clipfrac=clipfrac,
    )


_normalize = normalize_advantages  # ppo_loss's keyword shadows the function name


def kl_early_stop(epoch_kls: list[float], target_kl: float) -> bool:
    """Whether a batch's remaining epochs are skipped after an epoch whose minibatches measured
    ``epoch_kls`` (the approx KL of each minibatch before its step): their mean is above
    ``target_kl`` (CleanRL's and SB3's ``target_kl``, checked once per epoch). ``target_kl == 0``
    never stops; an epoch with no minibatch measured (every one empty) does not stop either."""
    if target_kl <= 0 or not epoch_kls:
        return False
    return float(np.mean(epoch_kls)) > target_kl


class EpochLoop:
    """The (epoch, minibatch) steps of PPO on one batch: ``epochs`` passes of ``minibatches`` steps,
    ending after an epoch whose measured approx KLs pass ``target_kl`` (:func:`kl_early_stop`).
    Report each step's KL with :meth:`measured`; ``epochs_run`` counts the epochs begun."""

    def __init__(self, epochs: int, minibatches: int, target_kl: float) -> None:
        self.epochs, self.minibatches, self.target_kl = epochs, minibatches, target_kl
        self.epochs_run = 0
        self._kls: list[float] = []

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for epoch in range(self.epochs):
            self.epochs_run, self._kls = epoch + 1, []
            for mb in range(self.minibatches):
                yield epoch, mb
            if kl_early_stop(self._kls, self.target_kl):
                return

    def measured(self, kl: float) -> None:
        """The approx KL of the current minibatch, measured before its step."""
        self._kls.append(kl)


def explained_variance(y_pred: np.ndarray | torch.Tensor, y_true: np.ndarray | torch.Tensor) -> float:
    """``1 - Var(y_true - y_pred) / Var(y_true)``; nan when ``Var(y_true) == 0``."""
    yp = _to_numpy(y_pred).reshape(-1)
    yt = _to_numpy(y_true).reshape(-1)
    var_y = np.var(yt)
    if yt.size == 0 or var_y == 0:
        return float("nan")
    return float(1.0 - np.var(yt - yp) / var_y)


def linear_schedule(start: float, end: float, progress: float) -> float:
    """Linear interpolation from ``start`` (progress 0) to ``end`` (progress 1); progress clamped."""
    p = min(max(float(progress), 0.0), 1.0)
    return start + (end - start) * p


def _to_numpy(x: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)
