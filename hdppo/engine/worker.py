"""Worker: env copies under the hierarchy with local copies of every layer's policy.

It steps its envs (one batched forward pass per layer per step), keeps per-layer rollouts, and
when a layer's rollout is due computes that layer's PPO gradients (gradients mode) or hands over
its transitions (experience mode). It never imports Ray; every backend drives this same class.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from hdppo.engine.buffer import RolloutBuffer
from hdppo.engine.config import LayerConfig, TrainConfig, train_config_from_dict
from hdppo.engine.learner import (
    Batch,
    action_histogram,
    build_policy,
    critic_obs,
    flat_grad,
    load_flat_params,
    load_policy,
    minibatch_loss,
    minibatches,
)
from hdppo.engine.messages import CollectResult, Decision, GradResult, LayerInfo, StepResult, WorkerSpec
from hdppo.engine.normalize import RewardNormalizer
from hdppo.engine.params import ParamStore
from hdppo.engine.peers import PeerBlocks, PeerResult, run_peer_update
from hdppo.engine.torch_stream import TorchStream
from hdppo.errors import HdppoError
from hdppo.team.controllers import scripted_policy, uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario

EPISODE_SCALARS = ("length", "team_return")


def worker_seed(seed: int, worker_id: int) -> int:
    return (seed * 1_000_003 + worker_id * 7_919 + 17) % (2 ** 31)


class _LayerRuntime:
    """One layer inside a worker: its policy (trained) or fixed controller, rollout and normaliser."""

    def __init__(self, info: LayerInfo, lc: LayerConfig, n_envs: int, trained: bool,
                 fixed: Callable[[Decision], np.ndarray] | None, seed: int) -> None:
        self.info, self.lc, self.trained, self.fixed = info, lc, trained, fixed
        self.policy = build_policy(info, lc, seed) if trained else None
        self.param_list = list(self.policy.parameters()) if self.policy is not None else []   # walked every round
        self.buffer = RolloutBuffer(n_envs, info.n_slots)
        self.norm = RewardNormalizer(n_envs, info.n_slots, lc.reward_norm)
        self.version = -1
        self.ent_coef = lc.ent_coef
        self.batch: Batch | None = None
        self.batch_version = -1
        self.perms: list[list[np.ndarray]] | None = None
        self.roles = info.slot_roles if lc.roles else None

    @property
    def net(self) -> Any:
        """The trained layer's actor-critic (only trained layers have one)."""
        assert self.policy is not None, f"layer {self.info.name!r} is not trained here"
        return self.policy

    def act_fixed(self, d: Decision) -> np.ndarray:
        """The untrained layer's fixed controller (a frozen checkpoint, scripted or uniform)."""
        assert self.fixed is not None, f"layer {self.info.name!r} is trained here"
        return self.fixed(d)


class Worker:
    """See the module docstring. Methods are the calls every backend makes."""

    def __init__(self, spec: WorkerSpec, params: ParamStore) -> None:
        torch.set_num_threads(1)
        self.spec, self.params, self.id = spec, params, spec.worker_id
        self.tc: TrainConfig = train_config_from_dict(spec.train)
        self.scenario = load_scenario(spec.scenario)
        self.cfg = self.scenario.make_config(spec.scenario_overrides)
        seed = worker_seed(self.tc.seed, self.id)
        self.hier = HierarchyEnv(self.scenario, self.cfg, n_envs=self.tc.envs_per_worker, seed=seed)
        self.np_rng = np.random.default_rng(seed)
        self._stream = TorchStream(seed)        # this worker's own torch random stream
        self.layers: list[_LayerRuntime] = []
        for info, lspec in zip(self.hier.info, self.hier.specs):
            lc = self.tc.layer(info.name)
            trained = info.name in spec.trained
            fixed = None if trained else self._fixed_policy(info, lspec, lc, seed)
            self.layers.append(_LayerRuntime(info, lc, self.tc.envs_per_worker, trained, fixed, seed))
        self.by_name = {rt.info.name: rt for rt in self.layers}
        self._step: Any = None          # an env step whose decisions are made, paused before the env steps
        self.peers: PeerBlocks | None = None        # peer rounds (process backend): shared memory, barrier,
        self.peer_barrier: Any = None               # and this worker's replicas of the servers
        self.replicas: dict[str, Any] = {}

    # ---- setup -----------------------------------------------------------------------------
    def _fixed_policy(self, info: LayerInfo, lspec: Any, lc: LayerConfig, seed: int):
        path = self.spec.frozen.get(info.name)
        if path is not None:
            return self._frozen(info, path)
        if lspec.scripted is not None:
            return scripted_policy(info, lspec.scripted, seed + 7 * (info.index + 1))
        return uniform_policy(info, seed + 7 * (info.index + 1))

    def _frozen(self, info: LayerInfo, path: str):
        policy, lc, _ = load_policy(info, path)
        roles = info.slot_roles if lc.roles else None

        def act(d: Decision) -> np.ndarray:
            return _to_space(self._sample(policy, d, roles, lc.centralized, self.spec.deterministic)[0],
                             info.action_space)
        return act

    # ---- acting ----------------------------------------------------------------------------
    def _sample(self, policy, d: Decision, roles, centralized: bool, deterministic: bool = False):
        E, S, D = d.obs.shape
        obs = torch.from_numpy(np.ascontiguousarray(d.obs, dtype=np.float32).reshape(E * S, D))
        mask = None if d.action_mask is None else torch.from_numpy(d.action_mask.reshape(E * S, -1))
        r = None if roles is None else torch.from_numpy(np.tile(roles, E))
        crit = critic_obs(d.obs, self.hier.slot_alive(d.layer)) if centralized else None
        c = None if crit is None else torch.from_numpy(crit.reshape(E * S, -1))
        with self._stream.active():
            a, logp, v = policy.act(obs, mask=mask, roles=r, critic_obs=c, deterministic=deterministic)
        a = a.numpy()
        return a.reshape((E, S) + a.shape[1:]), logp.numpy().reshape(E, S), v.numpy().reshape(E, S), crit

    def _act(self, d: Decision) -> np.ndarray:
        rt = self.layers[d.layer]
        if not rt.trained:
            return rt.act_fixed(d)
        a, logp, v, crit = self._sample(rt.net, d, rt.roles, rt.lc.centralized)
        rt.buffer.add(d.obs, d.mask, a, logp, v, d.action_mask, crit)
        return _to_space(a, rt.info.action_space)

    def _record(self, result: StepResult) -> None:
        for rt, step in zip(self.layers, result.layers):
            if not rt.trained:
                continue
            rt.buffer.env_steps += 1
            if not step.closed.any():
                continue
            ended = step.terminal | step.truncated
            rewards = rt.norm(step.closed, step.reward, step.discount, ended)
            raw = step.reward
            discounts = step.discount.copy()
            if step.truncated.any():
                rewards = rewards.copy()
                assert step.final_obs is not None         # the hierarchy gives it with every truncation
                tail = self._bootstrap(rt, step.final_obs, step.truncated)
                rewards[step.truncated] += discounts[step.truncated] * tail
                discounts[step.truncated] = 0.0
            rt.buffer.close(step.closed, rewards, discounts, raw)

    def _bootstrap(self, rt: _LayerRuntime, final_obs: np.ndarray, which: np.ndarray) -> np.ndarray:
        """V(final obs) of slots cut off by a time limit."""
        e, s = np.nonzero(which)
        roles = None if rt.roles is None else torch.from_numpy(rt.roles[s])
        crit = None
        if rt.lc.centralized:
            crit = torch.from_numpy(critic_obs(final_obs, which)[e, s])
        with torch.no_grad():
            v = rt.net.value(torch.from_numpy(np.ascontiguousarray(final_obs[e, s], dtype=np.float32)),
                                roles=roles, critic_obs=crit)
        return v.numpy()

    # ---- calls from the driver ---------------------------------------------------------------
    def pull(self, layer: str | None = None) -> None:
        """Load the newest parameters of one or every trained layer (no-op when up to date)."""
        for rt in (self.layers if layer is None else [self.by_name[layer]]):
            if not rt.trained:
                continue
            got = self.params.read(rt.info.name, rt.version)
            if got is not None:
                rt.version, rt.ent_coef, flat = got
                load_flat_params(rt.param_list, flat)

    def collect(self) -> CollectResult:
        """Step the envs until at least one trained layer's rollout is due; prepare those batches.

        A rollout ends after the decisions of the next env step (paused before the env steps), as
        flat PPO ends with the value of the next observation: every transition that closed on the
        last step bootstraps from its slot's next decision, whose row waits, open, in the buffer.
        The next call steps the env with those decisions."""
        t0 = time.perf_counter()
        self.pull()
        pull_every = {rt.lc.sync_every for rt in self.layers if rt.trained and rt.lc.sync == "async"} - {0}
        every = min(pull_every) if pull_every else 0
        steps, episodes = 0, []
        trained = [rt for rt in self.layers if rt.trained]
        if not trained:
            raise RuntimeError("collect() needs at least one trained layer")
        if self._step is None:
            self._decide()
        while True:
            result = self._env_step()
            self._record(result)
            steps += 1
            for ep in result.episodes:
                episodes.append({k: v for k, v in ep.items() if not isinstance(v, (dict, np.ndarray))})
            if every and steps % every == 0:
                self.pull()
            self._decide()
            due = [rt for rt in trained if rt.buffer.env_steps >= rt.lc.rollout_steps(rt.info.interval)]
            if due:
                break
        stats = {}
        for rt in due:
            rt.batch = rt.buffer.take(rt.lc.gae_lambda, rt.roles)
            rt.batch_version = rt.version
            rt.perms = None
            stats[rt.info.name] = self._batch_stats(rt)
        return CollectResult(self.id, steps * self.hier.n_envs, [rt.info.name for rt in due], episodes,
                             self.hier.pop_goal_counts(), time.perf_counter() - t0, stats)

    def _decide(self) -> None:
        """Make every decision of the next env step (their rows enter the buffers) and pause there."""
        self._step = self.hier.step_iter(pause=True)
        decision = next(self._step)
        while decision is not None:
            decision = self._step.send(self._act(decision))

    def _env_step(self) -> StepResult:
        """Step the envs with the decisions `_decide` made."""
        step, self._step = self._step, None
        try:
            step.send(None)
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("HierarchyEnv.step_iter asked for a decision after its pause")

    def _batch_stats(self, rt: _LayerRuntime) -> dict:
        b = rt.batch
        assert b is not None, "stats of a batch before it was taken"
        s = dict(b.stats)
        if len(b):
            s["return_moments"] = (len(b), float(b.returns.mean()), float(b.returns.var()))
            s["obs_mean"] = b.obs.mean(axis=0)
            s["obs_std"] = b.obs.std(axis=0)
            s["action_hist"] = action_histogram(b.actions, rt.info.action_space)
        return s

    def gradient(self, layer: str, epoch: int, mb: int) -> GradResult:
        """PPO gradient of one minibatch of this worker's batch under the newest parameters."""
        t0 = time.perf_counter()
        rt = self.by_name[layer]
        self.pull(layer)
        b = rt.batch
        if b is None or len(b) == 0:
            return GradResult(layer, self.id, rt.version, 0, None, {})
        if rt.perms is None:
            rt.perms = [minibatches(len(b), rt.lc.minibatches, self.np_rng) for _ in range(rt.lc.epochs)]
        idx = rt.perms[epoch][mb]
        if len(idx) == 0:
            return GradResult(layer, self.id, rt.version, 0, None, {})
        for p in rt.param_list:
            p.grad = None
        terms = minibatch_loss(rt.net, b.take(idx), rt.lc, rt.ent_coef)
        terms.loss.backward()
        grad = flat_grad(rt.param_list)
        return GradResult(layer, self.id, rt.version, len(idx), grad, terms.scalars(), time.perf_counter() - t0,
                          b.stats["raw_reward_mean"])

    def peer_update(self, layer: str, pool: list[int], lr: float, ent_coef: float) -> PeerResult:
        """One sync gradients update stepped by the pool's workers among themselves
        (hdppo/engine/peers.py): the process backend's alternative to a `gradient` call per round."""
        if self.peers is None or self.peer_barrier is None:
            raise HdppoError(f"worker {self.id} got a peer_update without the process backend's peer blocks",
                             "this is a bug in the backend that made the call; HDPPO_PEER_ROUNDS=0 avoids it")
        return run_peer_update(self, layer, pool, lr, ent_coef)

    def experience(self, layer: str) -> tuple[int, Batch | None]:
        """This worker's batch of a layer and the parameter version that collected it; no batch
        (a worker restarted since its last collect) at the newest version it was given, so the
        server does not count it as infinitely stale."""
        rt = self.by_name[layer]
        if rt.batch is None:
            latest = self.params.read(layer, -1)
            return (latest[0] if latest is not None else -1), None
        return rt.batch_version, rt.batch

    def close(self) -> None:
        self.hier.close()


def _to_space(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Actions as the env takes them: Gaussian samples clipped into a Box and shaped like it
    (the buffer keeps the unclipped sample, whose log-probability PPO needs)."""
    if isinstance(space, gym.spaces.Box):
        shaped = actions.reshape(actions.shape[:2] + space.shape)
        return np.clip(shaped, space.low, space.high).astype(space.dtype)
    return actions
