"""ParameterServer: one layer's parameters, Adam state, version, schedules and aggregation.

Gradients mode: workers send PPO gradients of a minibatch; `apply` aggregates them (by samples,
uniformly, or by trajectory return), clips the global norm and takes one Adam step. Async mode
applies each gradient as it arrives unless it is more than `max_staleness` versions old.
Experience mode: `train` runs the PPO epochs here on the workers' transitions.

Divergence stops the run: a non-finite loss or gradient norm is refused before the optimizer step,
and parameters that the step made non-finite are refused before they are published (`params`), so
no worker and no commit ever sees them (DivergenceError, naming the layer and the update).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hdppo.engine.checkpoint import load_module_state, load_optimizer_state, module_state, optimizer_state
from hdppo.engine.config import LayerConfig
from hdppo.engine.learner import (
    Batch,
    build_policy,
    flat_params,
    load_flat_params,
    minibatch_loss,
    minibatches,
    policy_meta,
)
from hdppo.engine.messages import GradResult, LayerInfo
from hdppo.engine.normalize import RunningMeanStd
from hdppo.engine.ppo import EpochLoop, linear_schedule
from hdppo.errors import HdppoError

if TYPE_CHECKING:
    from hdppo.policies.mlp import ActorCritic


def aggregation_weights(kind: str, counts: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """Normalised weights of workers' gradients: by sample count, uniform, or softmax of standardised return.

    `returns` must be on one scale for all workers: the trainer passes each batch's mean reward per
    transition in env units (before each worker's own reward normalisation)."""
    counts = np.asarray(counts, dtype=np.float64)
    live = counts > 0
    if not live.any():
        return np.zeros_like(counts)
    if kind == "samples":
        w = counts
    elif kind == "uniform":
        w = live.astype(np.float64)
    elif kind == "return":
        r = np.asarray(returns, dtype=np.float64)
        z = (r - r[live].mean()) / (r[live].std() + 1e-8)
        w = np.where(live, np.exp(z - z[live].max()), 0.0)
    else:
        raise ValueError(f"unknown aggregation {kind!r}; use samples, uniform or return")
    return w / w.sum()


def cosines(grads: list[np.ndarray], b: np.ndarray) -> list[float]:
    """The cosine of each gradient to `b` (NaN where either is zero)."""
    nb = float(np.linalg.norm(b))
    out = []
    for a in grads:
        na = float(np.linalg.norm(a))
        out.append(float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan"))
    return out


class DivergenceError(HdppoError):
    """A layer's training produced a non-finite loss, gradient or parameter: the run stops there."""


@dataclass
class ServerStats:
    updates: int = 0
    dropped: int = 0
    stat_versions: int = 0          # versions that only published new value_norm statistics
    staleness: dict[int, int] = field(default_factory=dict)


class ParameterServer:
    """Owner of one layer's parameters; see the module docstring."""

    def __init__(self, info: LayerInfo, lc: LayerConfig, seed: int, device: str = "cpu") -> None:
        self.info, self.lc = info, lc
        self.name = info.name
        self.device = torch.device(device)
        self.policy: ActorCritic = build_policy(info, lc, seed).to(self.device)
        self._params = list(self.policy.parameters())        # the order of the flat vectors workers see
        self._trainable = [p for p in self._params if p.requires_grad]
        self.optimizer = torch.optim.Adam(self._trainable, lr=lc.lr, eps=1e-5, fused=True)
        # gradients mode: a step's flat gradient, and the trainable parameters' .grad as views of it
        # (one copy per step instead of one tensor per parameter), and the aggregation's float64 sums
        self._grad = torch.zeros(self.n_params, device=self.device)
        self._grad_views = _views(self._params, self._grad)
        self._agg, self._term = np.zeros(self.n_params), np.zeros(self.n_params)
        self.returns = RunningMeanStd()             # value_norm: the statistics of the value targets
        self.version = 0
        self.progress = 0.0
        self.stats = ServerStats()
        self.env_steps = 0
        self._rng = np.random.default_rng(seed)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self._params)

    @property
    def n_trainable(self) -> int:
        """Entries of Adam's flat state (`adam_state`): the trainable parameters' sizes summed."""
        return sum(p.numel() for p in self._trainable)

    # ---- handing the state to peer rounds (hdppo/engine/peers.py) ---------------------------
    def adam_state(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Adam's first and second moments as flat float32 vectors over the trainable parameters (in
        their order), and its step count; zeros and 0 before the first step. None where the
        parameters are not all at one step (only experience mode, whose backward can leave a
        parameter without a gradient, makes that): one step count cannot carry it."""
        state = self.optimizer.state
        if not state:
            zeros = np.zeros(self.n_trainable, np.float32)
            return zeros, zeros.copy(), 0.0
        steps = {float(state[p]["step"]) if p in state else None for p in self._trainable}
        if len(steps) != 1 or None in steps:
            return None
        m = torch.cat([state[p]["exp_avg"].reshape(-1) for p in self._trainable])
        v = torch.cat([state[p]["exp_avg_sq"].reshape(-1) for p in self._trainable])
        return m.cpu().numpy(), v.cpu().numpy(), float(state[self._trainable[0]]["step"])

    def adopt(self, params: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, step: float,
              version: int, updates: int, staleness: dict[int, int]) -> None:
        """Take over a state stepped elsewhere (a peer round's replica): flat parameters (all of them,
        in `params()` order), Adam's moments and step (`adam_state`'s form), the version it reached,
        and the steps and gradient staleness it counted on the way."""
        load_flat_params(self._params, params)
        self.optimizer.state.clear()
        if step > 0:                   # before the first step Adam has no state (it makes it then)
            i = 0
            for p in self._trainable:
                k = p.numel()
                self.optimizer.state[p] = {
                    "step": torch.tensor(step, dtype=torch.float32, device=p.device),
                    "exp_avg": torch.as_tensor(exp_avg[i:i + k], device=p.device).view_as(p).clone(),
                    "exp_avg_sq": torch.as_tensor(exp_avg_sq[i:i + k], device=p.device).view_as(p).clone()}
                i += k
        self.version = int(version)
        self.stats.updates += int(updates)
        for s, count in staleness.items():
            self.stats.staleness[int(s)] = self.stats.staleness.get(int(s), 0) + int(count)

    # ---- schedules ---------------------------------------------------------------------------
    def set_progress(self, progress: float) -> None:
        """Fraction of the run done, in [0, 1]; drives linear LR decay and the entropy schedule."""
        self.progress = min(max(progress, 0.0), 1.0)
        lr = linear_schedule(self.lc.lr, 0.0, self.progress) if self.lc.lr_decay else self.lc.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    @property
    def ent_coef(self) -> float:
        return linear_schedule(self.lc.ent_coef, self.lc.ent_coef_final, self.progress)

    def params(self) -> np.ndarray:
        """The flat parameters to publish; DivergenceError if any is NaN or infinite."""
        flat = flat_params(self._params)
        if not np.isfinite(flat).all():
            raise self.diverged(self.stats.updates, f"the step made {int((~np.isfinite(flat)).sum())} of its "
                                f"{flat.size} parameters non-finite")
        return flat

    def diverged(self, update: int, what: str) -> DivergenceError:
        """The one-line error of a diverged layer: which layer, which update, what was non-finite."""
        return DivergenceError(
            f"layer {self.name!r} diverged at update {update} (parameter version {self.version}): {what}; "
            "nothing non-finite was published or committed (the run's newest commit holds its last finite weights)",
            f"lower lr (now {self.lc.lr:g}) or max_grad_norm (now {self.lc.max_grad_norm:g}) and start a new run "
            "(a --resume keeps the same settings and would diverge again)")

    # ---- value normalisation -----------------------------------------------------------------
    def observe_returns(self, moments: list[tuple[int, float, float]]) -> None:
        """Merge the value targets of the batches about to be learnt from, as (count, mean, var) per
        worker, into the running statistics the critic is standardised by (value_norm; publish after)."""
        if not self.lc.value_norm:
            return
        for count, mean, var in moments:
            self.returns.merge(count, mean, var)
        with torch.no_grad():
            self.policy.value_mean.fill_(self.returns.mean)
            self.policy.value_std.fill_(max(float(np.sqrt(self.returns.var)), 1e-4))
        self.version += 1              # new statistics are new parameters: workers pull them by version
        self.stats.stat_versions += 1

    # ---- gradients mode ----------------------------------------------------------------------
    def apply(self, grads: list[GradResult]) -> dict[str, Any]:
        """Aggregate one minibatch gradient per worker (sync) and step; returns diagnostics."""
        live = [g for g in grads if g.n > 0 and g.grad is not None]
        if not live:
            return {}
        for g in live:
            loss = g.stats.get("loss")
            if loss is not None and not math.isfinite(loss):
                raise self.diverged(self.stats.updates + 1, f"worker {g.worker}'s loss is {loss}, so the step was not "
                                    "taken")
        for g in live:
            self._count_staleness(self.version - g.version)
        w = aggregation_weights(self.lc.aggregate, np.array([g.n for g in live]),
                                np.array([g.raw_reward_mean for g in live]))
        grad_list = [g.grad for g in live if g.grad is not None]   # every live one has a gradient
        self._agg.fill(0.0)                          # sum in float64, worker by worker, then round once
        for wi, grad in zip(w, grad_list):
            self._agg += np.multiply(grad, wi, out=self._term)
        agg = self._agg.astype(np.float32)
        out: dict[str, Any] = self._step(agg)       # floats, and per_worker_cosine {worker: cosine}
        cos = cosines(grad_list, agg)
        known = [c for c in cos if not math.isnan(c)]      # NaN: a zero gradient or aggregate has no direction
        out["grad_cosine_mean"] = float(np.mean(known)) if known else float("nan")
        out["grad_cosine_min"] = min(known) if known else float("nan")
        out["per_worker_cosine"] = {g.worker: c for g, c in zip(live, cos)}
        keys = list(live[0].stats)                   # the loss terms, weighted like the gradients
        terms = np.average([[g.stats[k] for k in keys] for g in live], axis=0, weights=w)
        out.update(zip(keys, terms.tolist()))
        return out

    def apply_async(self, g: GradResult) -> bool:
        """Apply one worker's gradient now, unless it is too stale (then drop and count it)."""
        if g.n == 0 or g.grad is None:
            return False
        staleness = self.version - g.version
        self._count_staleness(staleness)
        if staleness > self.lc.max_staleness:
            self.stats.dropped += 1
            return False
        self._step(g.grad)
        return True

    def _count_staleness(self, s: int) -> None:
        self.stats.staleness[s] = self.stats.staleness.get(s, 0) + 1

    def _step(self, grad: np.ndarray) -> dict[str, float]:
        self._grad.copy_(torch.as_tensor(grad))
        for p, view in self._grad_views:
            p.grad = view
        norm = self._clipped_norm()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        self.stats.updates += 1
        return {"grad_norm": norm, "lr": self.optimizer.param_groups[0]["lr"]}

    def _clipped_norm(self, loss: float = 0.0) -> float:
        """Clip the gradients in place; their norm before clipping. A non-finite norm (a NaN or
        infinite gradient) or loss raises DivergenceError before the optimizer can step on it."""
        norm = float(torch.nn.utils.clip_grad_norm_(self._trainable, self.lc.max_grad_norm))
        if not (math.isfinite(norm) and math.isfinite(loss)):
            self.optimizer.zero_grad(set_to_none=True)
            what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient's norm is {norm}"
            raise self.diverged(self.stats.updates + 1, f"{what}, so the step was not taken")
        return norm

    # ---- experience mode ---------------------------------------------------------------------
    def train(self, batches: list[tuple[int, Batch]]) -> dict[str, float]:
        """PPO epochs on the workers' transitions here (the fit for a GPU learner)."""
        fresh = []
        for version, b in batches:
            s = self.version - version
            self._count_staleness(s)
            if self.lc.sync == "async" and s > self.lc.max_staleness:
                self.stats.dropped += 1
            elif b is not None and len(b):
                fresh.append(b)
        if not fresh:
            return {}
        data = Batch.concat(fresh)
        terms_log: dict[str, list[float]] = {}
        ent = self.ent_coef
        epochs = EpochLoop(self.lc.epochs, self.lc.minibatches, self.lc.target_kl)
        for _, mb in epochs:
            if mb == 0:                                 # each epoch shuffles the batch anew
                split = minibatches(len(data), self.lc.minibatches, self._rng)
            idx = split[mb]
            if len(idx) == 0:
                continue
            terms = minibatch_loss(self.policy, _to_device(data.take(idx), self.device), self.lc, ent)
            self.optimizer.zero_grad(set_to_none=True)
            terms.loss.backward()
            scalars = terms.scalars()
            norm = self._clipped_norm(scalars.get("loss", 0.0))
            self.optimizer.step()
            for k, v in scalars.items():
                terms_log.setdefault(k, []).append(v)
            terms_log.setdefault("grad_norm", []).append(norm)
            epochs.measured(terms_log["approx_kl"][-1])
        self.version += 1
        self.stats.updates += 1
        out = {k: float(np.mean(v)) for k, v in terms_log.items()}
        out["lr"] = self.optimizer.param_groups[0]["lr"]
        out["epochs"] = float(epochs.epochs_run)
        return out

    # ---- checkpoints -------------------------------------------------------------------------
    def state(self) -> tuple[dict[str, torch.Tensor], dict]:
        tensors = module_state(self.policy)
        opt_tensors, opt_meta = optimizer_state(self.optimizer)
        tensors.update(opt_tensors)
        meta = policy_meta(self.info, self.lc)
        meta.update({"version": self.version, "updates": self.stats.updates, "dropped": self.stats.dropped,
                     "stat_versions": self.stats.stat_versions,
                     "progress": self.progress, "env_steps": self.env_steps, "optimizer": opt_meta,
                     "value_stats": [self.returns.count, self.returns.mean, self.returns.var]})
        return tensors, meta

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict) -> None:
        load_module_state(self.policy, tensors)
        load_optimizer_state(self.optimizer, tensors, meta["optimizer"])
        self.version = int(meta["version"])
        self.stats.updates = int(meta.get("updates", 0))
        self.stats.dropped = int(meta.get("dropped", 0))
        self.stats.stat_versions = int(meta.get("stat_versions", 0))
        self.env_steps = int(meta.get("env_steps", 0))
        if "value_stats" in meta:
            self.returns.count, self.returns.mean, self.returns.var = (float(x) for x in meta["value_stats"])
        self.set_progress(float(meta.get("progress", 0.0)))


def _views(params: Sequence[torch.Tensor], flat: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(parameter, its slice of `flat` shaped like it) for each trainable parameter, in `params`'
    order; untrained ones (value_norm statistics) keep their place in `flat` and get no view."""
    out, i = [], 0
    for p in params:
        if p.requires_grad:
            out.append((p, flat[i:i + p.numel()].view_as(p)))
        i += p.numel()
    return out


def _to_device(b: Batch, device: torch.device) -> Batch:
    if device.type == "cpu":
        return b
    from hdppo.engine.learner import BATCH_KEYS
    kw: dict[str, Any] = {k: (None if getattr(b, k) is None else torch.as_tensor(getattr(b, k), device=device))
                          for k in BATCH_KEYS}
    return Batch(**kw)
