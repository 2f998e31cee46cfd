"""Pre-flight checks of a run's sizes, before its folder is made or any worker starts.

`preflight(tc, infos, stages)` refuses, in one line with the numbers, what cannot run on this machine
or cannot run as asked: more minibatches than a rollout gives a layer samples (every update would
then run empty gradient rounds: 100,000 minibatches of a 4,096-sample batch), and a run whose
estimated memory (`estimate_memory`) exceeds what the machine has available now. It returns the
warnings worth one line (far more worker processes than cores).

The estimate is an upper bound of the largest parts, calibrated on `grid` and `skirmish`
(docs/engine.md#limits): per worker the env copies, each trained layer's rollout rows (a row per env
step of the rollout, `envs x slots x (obs + centralized critic obs)` float32 plus the per-slot
scalars) and the two copies `RolloutBuffer.take` makes of the largest, the minibatch activations, the
policies; per worker process the interpreter with torch loaded; on the driver each trained layer's
server (weights, gradients, Adam) and the gradients or batches of one round.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hdppo.engine.config import LayerConfig, TrainConfig
from hdppo.engine.messages import LayerInfo
from hdppo.errors import ConfigError

MIB = 1 << 20
F32 = 4
ROW_SCALARS = 32                # bytes per slot and row besides observations: valid, action, logp, rewards...
ENV_FACTOR = 2                  # an env copy holds about this many slot observations per layer (measured 1.2-1.5)
PROCESS_WORKER = 200 * MIB      # a spawned worker process with torch and a small scenario (measured USS 195 MiB)
RAY_DAEMONS = 600 * MIB         # a local Ray's own processes (GCS, raylet, dashboard)
OVERSUBSCRIBED = 4              # warn when a machine runs more than this many worker processes per core


@dataclass
class MemoryEstimate:
    """Bytes a run is expected to need at its peak, by part (what the refusal prints)."""

    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def largest(self, n: int = 3) -> str:
        top = sorted(self.parts.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{name} {gib(size)}" for name, size in top if size > 0)


def gib(size: float) -> str:
    return f"{size / (1 << 30):,.1f} GiB" if size >= 1 << 30 else f"{size / MIB:,.0f} MiB"


def available_memory() -> int:
    """Bytes of memory a new allocation can get now without swapping (psutil's `available`)."""
    import psutil
    return int(psutil.virtual_memory().available)


def policy_params(info: LayerInfo, lc: LayerConfig) -> int:
    """Parameters of a layer's policy, built on torch's meta device (no memory, no random draws);
    a policy kind that does not build there is counted as its MLP."""
    import torch

    from hdppo.engine.learner import policy_spec
    from hdppo.policies.factory import make_policy
    spec = policy_spec(info, lc)
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            net = make_policy(info.obs_dim, info.action_space, spec, spec.critic_obs_dim)
        return int(sum(p.numel() for p in net.parameters()))
    except Exception:                                 # a user's policy kind: its MLP-sized stand-in
        import gymnasium as gym
        out = gym.spaces.flatdim(info.action_space)
        actor = _mlp_params(info.obs_dim, lc.hidden, out)
        critic = _mlp_params(spec.critic_obs_dim or info.obs_dim, lc.hidden, 1)
        return actor + critic


def _mlp_params(width: int, hidden: Iterable[int], out: int) -> int:
    total = 0
    for h in hidden:
        total += (width + 1) * int(h)
        width = int(h)
    return total + (width + 1) * out


def samples_per_rollout(info: LayerInfo, lc: LayerConfig, envs: int) -> int:
    """A layer's decisions in one worker's rollout when every slot lives: its batch in gradients mode."""
    return math.ceil(lc.rollout_steps(info.interval) / info.interval) * info.n_slots * envs


def check_minibatches(tc: TrainConfig, infos: list[LayerInfo], trained: Iterable[str]) -> None:
    """Refuse more minibatches than a layer's batch has samples: each minibatch is a gradient round
    of every worker (or a server step), so the extra ones are empty rounds, and the run crawls."""
    by_name = {i.name: i for i in infos}
    n = tc.n_workers()
    for name in trained:
        info, lc = by_name[name], tc.layers[name]
        samples = samples_per_rollout(info, lc, tc.envs_per_worker)
        how = (f"{math.ceil(lc.rollout_steps(info.interval) / info.interval)} decisions per copy x {info.n_slots} "
               f"slots x {tc.envs_per_worker} envs")
        if lc.mode == "experience":                  # the server pools its workers' batches
            pool = min(lc.pool or n, n)
            samples *= pool
            how += f" x {pool} workers"
        if lc.minibatches > samples:
            raise ConfigError(f"layer {name!r}: minibatches={lc.minibatches:,} is more than the {samples:,} samples a "
                              f"rollout gives it ({how}), so every update would run "
                              f"{lc.minibatches - samples:,} empty minibatches",
                              f"pass {name}.minibatches={min(samples, LayerConfig.minibatches)} (at most {samples:,}), "
                              f"or raise {name}.rollout or envs_per_worker")


def estimate_memory(tc: TrainConfig, infos: list[LayerInfo], stages: list[Any],
                    acting: Iterable[str] = ()) -> MemoryEstimate:
    """Peak bytes of the run over its stages (see the module's docstring); `acting` are layers the
    workers play with a checkpoint (frozen) besides the trained ones."""
    by_name = {i.name: i for i in infos}
    n, envs = tc.n_workers(), tc.envs_per_worker
    processes = tc.backend in ("process", "ray")
    remote = tc.backend == "ray" and bool(tc.address)       # workers on a cluster: only the driver's share is here
    params = {name: policy_params(by_name[name], tc.layers[name]) for name in {*acting, *_trained(stages)}}
    best = MemoryEstimate()
    for stage in stages:
        parts: dict[str, int] = {}
        env = envs * sum(i.n_slots * i.obs_dim * F32 * ENV_FACTOR for i in infos)
        rows, activations = {}, 0
        for name in stage.trained:
            info, lc = by_name[name], tc.layers[name]
            width = info.obs_dim * (4 if lc.centralized else 1) * F32 + ROW_SCALARS
            rows[name] = lc.rollout_steps(info.interval) * envs * info.n_slots * width
            batch = samples_per_rollout(info, lc, envs)
            per_sample = (info.obs_dim * (4 if lc.centralized else 2) + 4 * sum(lc.hidden)) * F32
            activations = max(activations, math.ceil(batch / max(lc.minibatches, 1)) * per_sample)
        buffers = sum(rows.values()) + 2 * max(rows.values(), default=0)      # take() stacks the largest, then selects
        policies = sum(params.values()) * F32 * 3      # every layer workers play: weights, grads, a flat copy
        if not remote:
            parts["env copies"] = n * env
            parts["rollout buffers"] = n * buffers
            parts["minibatch activations"] = n * activations
            parts["worker policies"] = n * policies
            if processes:
                parts["worker processes"] = n * PROCESS_WORKER + (RAY_DAEMONS if tc.backend == "ray" else 0)
        servers = sum(params[name] for name in stage.trained) * F32 * 6      # weights, grads, Adam m and v, copies
        parts["servers"] = servers
        incoming = 0
        for name in stage.trained:
            lc = tc.layers[name]
            pool = min(lc.pool or n, n)
            if lc.mode == "experience":
                info = by_name[name]
                incoming += pool * samples_per_rollout(info, lc, envs) * (
                    info.obs_dim * (4 if lc.centralized else 1) * F32 + ROW_SCALARS)
            else:
                incoming += pool * params[name] * F32
        parts["one round on the server"] = incoming
        candidate = MemoryEstimate(parts)
        if candidate.total > best.total:
            best = candidate
    return best


def _trained(stages: list[Any]) -> set[str]:
    return {name for stage in stages for name in stage.trained}


def preflight(tc: TrainConfig, infos: list[LayerInfo], stages: list[Any], acting: Iterable[str] = (), *,
              available: int | None = None, cores: int | None = None) -> list[str]:
    """Refuse (ConfigError) a run this machine cannot hold or that would run empty minibatches;
    return one-line warnings (more worker processes than cores by far)."""
    check_minibatches(tc, infos, sorted(_trained(stages)))
    estimate = estimate_memory(tc, infos, stages, acting)
    free = available_memory() if available is None else available
    n = tc.n_workers()
    if estimate.total > free:
        raise ConfigError(
            f"this run needs about {gib(estimate.total)} of memory at its peak ({estimate.largest()}; {n} "
            f"{tc.backend} worker(s) x {tc.envs_per_worker:,} envs), more than the {gib(free)} available",
            "lower envs_per_worker, --workers, LAYER.rollout or hidden sizes (the largest parts above), "
            "or free memory")
    notes = []
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if tc.backend in ("process", "ray") and not tc.address and n > OVERSUBSCRIBED * cores:
        notes.append(f"{n} {tc.backend} workers on {cores} cores ({n / cores:.0f} per core): they take turns, so a "
                     f"round runs no faster than {cores} workers with {n // cores}x the envs each, and every worker "
                     f"process costs ~{PROCESS_WORKER // MIB} MiB; pass --workers {cores} and "
                     f"envs_per_worker={tc.envs_per_worker * n // cores} instead")
    return notes
