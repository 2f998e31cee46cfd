"""A scenario's whole hierarchy as one RLlib `MultiAgentEnv`, and a PPO config with a module per layer.

Agents
------
Every decision slot of every layer is an agent named ``"LAYER:SLOT"``: ``"high:high_0/0"`` (a
per_child pair of the commander), ``"mid:mid_1"`` (a broadcast squad), ``"low:agent_3"`` (a unit).
`policy_mapping_fn` maps an agent to its layer's name, so each layer is one RLModule shared by its
slots. Spaces are the layer's `LayerInfo.obs_space` / `action_space`.

The stepping scheme (one RLlib step = one layer's decision, or one env step)
----------------------------------------------------------------------------
`HierarchyEnv.step_iter()` asks the deciding layers of an env step top-down, and a lower layer's
observation depends on the goals its parent chose at the same step. RLlib asks for every action of
an observation dict at once, so the layers of one env step cannot be answered together. The env
therefore returns the layers one at a time:

- ``reset`` runs the hierarchy to its first `Decision` with a live slot (the top layer at t = 0)
  and returns the observations of that layer's deciding slots only;
- ``step(actions)`` answers that pending decision (``actions`` must hold exactly its deciding
  slots), then resumes ``step_iter``: if a lower layer decides at the same env step, its
  observations are returned (no env step happened); if the answered layer was the last deciding
  one, the env steps, and the hierarchy advances (several env steps if no layer is due in between,
  e.g. with a bottom interval > 1) to the next `Decision` with a live slot, whose layer's
  observations are returned.

So with spread at 3 layers (intervals high 10, mid 5, low 1) an episode of 50 env steps is
50 + 5 + 10 = 65 RLlib steps: at t = 0 the env returns the high slots, then the mid slots, then
the units; at t = 1..4 the units; at t = 5 the mid slots, then the units; and so on. RLlib's
``num_env_steps_sampled`` and ``train_batch_size`` count these RLlib steps, not env steps.

Rewards, ends and discounts
---------------------------
- A slot's reward is returned at the RLlib step in which its transition closes: the semi-MDP
  reward ``R = sum_{i<k} gamma^i r_{t+i}`` of `LayerStep.reward`. Usually that is the step that
  also brings the slot's next observation; a lower layer's closing at an env step where an upper
  layer decides next arrives one RLlib step before its next observation, and RLlib adds it to the
  slot's pending transition (its "hanging" reward), so each transition gets exactly its R.
- ``infos[agent]["discount"]`` is the transition's ``gamma^k'`` (0 when terminal), as in
  `LayerView`. RLlib's GAE ignores it and discounts every module's decision sequence by the single
  ``PPOConfig.gamma`` per decision (so an upper layer's horizon in env steps is longer than the
  bottom layer's); an SMDP-exact learner would need a custom learner connector.
- A slot that ends while the episode goes on (its unit, or the child of a per_child pair, died)
  gets ``terminateds[agent] = True`` (or ``truncateds[agent] = True`` plus its final observation).
- When the episode ends, ``terminateds["__all__"]`` or ``truncateds["__all__"]`` is True exactly
  once (truncated if any closing slot was truncated, else terminated), and every slot that was
  still open gets its closing reward; truncated slots also get their final observation
  (`LayerStep.final_obs`) so RLlib can bootstrap. Terminal slots get ``terminateds[agent] = True``.
  Truncated slots are flagged by ``truncateds["__all__"]`` and ``infos[agent]["truncated"]``
  only, *not* by a per-agent ``truncateds[agent]``: RLlib 2.60's
  ``MultiAgentEpisode.add_env_step`` marks the whole episode *terminated* (no value bootstrap for
  any agent) when every agent carries its own done flag, which would turn every time-limit
  truncation into a terminal state.
- ``agents`` are the slots still in the episode (alive when it started, not ended since).

Not covered
-----------
- Action masks of the bottom layer are ignored: the units' observations are the flat
  `decision_obs` (no ``action_mask`` entry), and RLlib may choose masked actions, which reach the
  env unchanged. Building the env for a scenario whose env gives masks warns.
- Only ``n_envs = 1`` per env instance (RLlib vectorises with ``num_envs_per_env_runner``).
"""
from __future__ import annotations

import warnings
from collections.abc import Generator
from typing import Any

import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.interfaces import Decision, StepResult
from hdppo.team.scenario import Scenario, load_scenario

__all__ = ["ENV_NAME", "HierarchyMultiAgentEnv", "agent_layer", "policy_mapping_fn", "rllib_ppo_config"]

ENV_NAME = "hdppo_hierarchy"
SEP = ":"


def agent_layer(agent_id: str) -> str:
    """The layer name of an agent id ``"LAYER:SLOT"``."""
    return str(agent_id).partition(SEP)[0]


def policy_mapping_fn(agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
    """RLlib policy mapping: every slot of a layer maps to that layer's module (its name)."""
    return agent_layer(agent_id)


def _scenario(spec: Any) -> Scenario:
    return spec if isinstance(spec, Scenario) else load_scenario(str(spec))


def _seed(config: Any) -> int | None:
    """The env_config seed, offset per RLlib env runner and vector index so copies differ."""
    seed = config.get("seed")
    if seed is None:
        return None
    return int(seed) + 1000 * int(getattr(config, "worker_index", 0)) + int(getattr(config, "vector_index", 0))


class HierarchyMultiAgentEnv(MultiAgentEnv):
    """One copy of a scenario's hierarchy; every layer's slots are RLlib agents (module docstring).

    ``config`` (an RLlib EnvContext or a dict): ``scenario`` (a name, a file path, or a Scenario),
    optional ``overrides`` (scenario config key -> value) and ``seed``.
    """

    metadata = {"render_modes": []}

    def __init__(self, config: dict | None = None) -> None:
        super().__init__()
        config = config if config is not None else {}
        if "scenario" not in config:
            raise ValueError("HierarchyMultiAgentEnv needs env_config['scenario'] (a scenario name or path)")
        self.scenario = _scenario(config["scenario"])
        self.cfg = self.scenario.make_config(dict(config.get("overrides") or {}))
        self.hier = HierarchyEnv(self.scenario, self.cfg, n_envs=1, seed=_seed(config), autoreset=False)
        self.layer_names = [inf.name for inf in self.hier.info]
        if any(SEP in name for name in self.layer_names):
            raise ValueError(f"layer names may not contain {SEP!r} (agent ids are 'LAYER{SEP}SLOT'): "
                             f"{self.layer_names}")
        self._ids = [[f"{inf.name}{SEP}{s}" for s in inf.slot_names] for inf in self.hier.info]
        self._where = {aid: (i, s) for i, ids in enumerate(self._ids) for s, aid in enumerate(ids)}
        self.possible_agents = [aid for ids in self._ids for aid in ids]
        self.agents = []
        self.observation_spaces = {aid: self.hier.info[i].obs_space for aid, (i, _) in self._where.items()}
        self.action_spaces = {aid: self.hier.info[i].action_space for aid, (i, _) in self._where.items()}
        if self.hier.env.action_mask is not None:
            warnings.warn(f"scenario {self.scenario.name!r} gives action masks; the RLlib env ignores them "
                          "(RLlib may pick masked unit actions)", stacklevel=2)
        self._gen: Generator[Decision | None, np.ndarray | None, StepResult] | None = None
        self._pending: Decision | None = None
        self._deciding: list[str] = []
        self._done = True

    # ---- RLlib API -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.hier.reset(seed)
        self._gen, self._pending, self._done = None, None, False
        self.agents = [self._ids[i][s] for i in range(len(self._ids))
                       for s in np.flatnonzero(self.hier.slot_alive(i)[0])]
        out = self._drive(None)
        return self._observations(out), {}

    def step(self, action_dict: dict):
        if self._done:
            raise RuntimeError("the episode is over: call reset() before step()")
        answer = self._answer(action_dict)
        out = self._drive(answer)
        obs = self._observations(out)
        ended = set(out["terminated"]) | set(out["truncated"])
        terminateds = {aid: True for aid in out["terminated"]}
        truncateds = {} if self._done else {aid: True for aid in out["truncated"]}
        terminateds["__all__"] = self._done and not out["truncated"]
        truncateds["__all__"] = self._done and bool(out["truncated"])
        infos = out["infos"]
        self.agents = [] if self._done else [a for a in self.agents if a not in ended]
        return obs, out["rewards"], terminateds, truncateds, infos

    def close(self) -> None:
        self.hier.close()

    # ---- internals -------------------------------------------------------------------------
    def _answer(self, action_dict: dict) -> np.ndarray:
        """The pending layer's action array [1, S, ...] from RLlib's actions for its deciding slots."""
        d = self._pending
        assert d is not None
        info = self.hier.info[d.layer]
        extra = set(action_dict) - set(self._deciding)
        missing = set(self._deciding) - set(action_dict)
        if extra or missing:
            raise ValueError(f"step() wants actions for exactly the deciding slots of layer {info.name!r}: "
                             f"missing {sorted(missing)}, unexpected {sorted(extra)}")
        return self._fill(d.layer, action_dict)

    def _fill(self, i: int, action_dict: dict) -> np.ndarray:
        space = self.hier.info[i].action_space
        shape = (1, self.hier.info[i].n_slots) + tuple(space.shape or ())
        out = np.zeros(shape, dtype=space.dtype if space.dtype is not None else np.int64)
        for aid, act in action_dict.items():
            out[0, self._where[aid][1]] = np.asarray(act)
        return out

    def _drive(self, answer: np.ndarray | None) -> dict:
        """Answer the pending decision, then run the hierarchy to the next Decision with a live slot
        (kept in self._pending) or to the episode's end; collect the transitions that closed."""
        out: dict[str, Any] = {"rewards": {}, "infos": {}, "terminated": [], "truncated": [], "final_obs": {}}
        reply = answer
        while True:
            try:
                if self._gen is None:
                    self._gen = self.hier.step_iter()
                    d = next(self._gen)
                else:
                    d = self._gen.send(reply)
            except StopIteration as stop:
                self._gen = None
                result: StepResult = stop.value
                self._collect(result, out)
                if result.done[0]:
                    self._done, self._pending, self._deciding = True, None, []
                    return out
                continue
            assert d is not None                   # step_iter() without pause yields only decisions
            if d.mask[0].any():
                self._pending = d
                self._deciding = [self._ids[d.layer][s] for s in np.flatnonzero(d.mask[0])]
                return out
            reply = self._fill(d.layer, {})        # the layer is due but none of its slots lives

    def _collect(self, result: StepResult, out: dict) -> None:
        for i, step in enumerate(result.layers):
            for s in np.flatnonzero(step.closed[0]):
                aid = self._ids[i][s]
                out["rewards"][aid] = out["rewards"].get(aid, 0.0) + float(step.reward[0, s])
                info = {"discount": float(step.discount[0, s])}
                if step.terminal[0, s]:
                    out["terminated"].append(aid)
                elif step.truncated[0, s]:
                    assert step.final_obs is not None      # a truncated transition carries its final obs
                    out["truncated"].append(aid)
                    out["final_obs"][aid] = np.asarray(step.final_obs[0, s], dtype=np.float32).copy()
                    info["truncated"] = True
                out["infos"][aid] = info

    def _observations(self, out: dict) -> dict:
        obs = dict(out["final_obs"])
        if self._pending is not None:
            d = self._pending
            for aid in self._deciding:
                obs[aid] = np.asarray(d.obs[0, self._where[aid][1]], dtype=np.float32).copy()
        return obs


def _make_env(env_config: Any) -> HierarchyMultiAgentEnv:
    return HierarchyMultiAgentEnv(env_config)


def rllib_ppo_config(scenario: str | Scenario, overrides: dict | None = None, *, seed: int | None = 0,
                     num_env_runners: int = 0, rollout_fragment_length: int | str = "auto",
                     hidden: tuple[int, ...] = (64, 64), env_name: str = ENV_NAME, **ppo_kwargs: Any):
    """An RLlib `PPOConfig` training `scenario`'s hierarchy with one RLModule per layer.

    Registers `HierarchyMultiAgentEnv` as ``env_name``; builds a `MultiRLModuleSpec` with one
    `RLModuleSpec` per layer (spaces from the layer infos, MLP ``hidden`` with tanh) and maps every
    slot to its layer. Small defaults: ``train_batch_size_per_learner`` 1000 (RLlib steps, see the
    module docstring), ``minibatch_size`` 128, ``num_epochs`` 4, ``lr`` 3e-4, ``gamma`` the
    scenario's, ``lambda_`` 0.95, ``vf_clip_param`` 1e4 (RLlib's 10 clips the value loss of upper
    layers whose SMDP returns are in the hundreds, so their value functions would not learn);
    ``ppo_kwargs`` go to ``PPOConfig.training()`` and override them.

    RLlib's multi-agent minibatches hold ``minibatch_size`` rows of *every* module and cycle each
    module's data until the largest module has done ``num_epochs`` epochs, so a layer with few
    decisions (the top) is trained on its rows many more times per iteration than the bottom.
    ``num_env_runners=0`` samples in the driver. A scenario object is passed to env runners by its
    source file (or name).
    """
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    if isinstance(scenario, Scenario):
        scenario = scenario.source or scenario.name
    env_config = {"scenario": str(scenario), "overrides": dict(overrides or {}), "seed": seed}
    probe = HierarchyMultiAgentEnv(env_config)
    try:
        infos, gamma = probe.hier.info, float(probe.cfg.gamma)
    finally:
        probe.close()
    register_env(env_name, _make_env)
    specs = {inf.name: RLModuleSpec(observation_space=inf.obs_space, action_space=inf.action_space)
             for inf in infos}
    training: dict[str, Any] = dict(train_batch_size_per_learner=1000, minibatch_size=128, num_epochs=4, lr=3e-4,
                                    gamma=gamma, lambda_=0.95, vf_clip_param=1e4)
    training.update(ppo_kwargs)
    config = (
        PPOConfig()
        .environment(env_name, env_config=env_config)
        .framework("torch")
        .env_runners(num_env_runners=num_env_runners, rollout_fragment_length=rollout_fragment_length,
                     batch_mode="truncate_episodes")
        .learners(num_learners=0, num_gpus_per_learner=0)
        .multi_agent(policies=set(specs), policy_mapping_fn=policy_mapping_fn, count_steps_by="env_steps")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs),
                   model_config=DefaultModelConfig(fcnet_hiddens=list(hidden), fcnet_activation="tanh"))
        .training(**training)
        .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=0)
    )
    if seed is not None:
        config = config.debugging(seed=seed)
    return config

