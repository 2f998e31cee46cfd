"""VMAS (the torch-vectorised multi-robot simulator) as a native hdppo batched env and scenario.

`VmasBatch` wraps ONE `vmas.make_env(task, num_envs=E, ...)`: the E copies step as one batch of
torch ops, on the CPU or a CUDA device, with no per-copy Python loop in `step`. Once per step the
adapter converts the agents' observations and rewards to numpy ([E, U, D] / [E, U]): hdppo's
policies run on numpy arrays on the CPU today, so with `device="cuda"` (a vmas_scenario's
`sim_device=cuda`) the simulator runs on the GPU and its outputs cross to the host once per step.

`vmas_scenario(task, ...)` turns any VMAS task (a name from `vmas.scenarios`, or your own
`BaseScenario` subclass) into an hdppo `Scenario`: a config dataclass holding the task's
parameters, a flat team (`layers=1`), or commander -> squads of `squad_size` -> units (`layers=3`).

Mapping (VMAS -> hdppo):
- observations: each agent's tensor [E, D_i] -> `obs` [E, U, D] float32 (narrower agents are
  zero-padded to the widest); `state()` is every agent's observation concatenated [E, U * D];
- rewards: per agent [E] -> [E, U];
- ends: VMAS's `max_steps` is a time limit -> `truncated` (hdppo bootstraps); the task's own
  `done()` (a package delivered, one dropped, every goal reached) -> `terminated`; a step that is
  both counts as terminated. VMAS agents never die mid-episode: every unit is alive until its
  copy's episode ends;
- actions: Discrete (VMAS's `continuous_actions=False`, one flat Discrete per agent) or a Box per
  agent (u range, then communication in [0, 1] for agents that talk), clipped to each agent's own
  range before VMAS sees them;
- `reset_done(mask)`: VMAS resets either every copy (`reset`) or one (`reset_at(i)`), there is no
  masked batch reset; all copies done -> one batched `reset`, else `reset_at` for the done copies
  only (what TorchRL's VMAS wrapper does too), then one observation read;
- seeding: VMAS seeds a whole env, not copy by copy; `reset(seed)` seeds the batch with `seed`
  (the `seed + e` per-copy contract of `NumpyBatch` does not hold). VMAS keeps one random stream
  for every VMAS env of a process, so two VmasBatch stepped in one process interleave its draws;
- `episode_info(e)`: `terminated` (1.0 when the task's own done ended the episode, 0.0 at the time
  limit) and, for every key of the task's `info()`, its mean over agents at the last step.
"""
from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError, ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep

INSTALL_FIX = "pip install 'hdppo[vmas]' (or: pip install vmas==1.5.2)"
# fields of a vmas_scenario config that configure the adapter or the team, not the VMAS task
ADAPTER_KEYS = ("max_steps", "continuous_actions", "sim_device", "layers", "squad_size", "goals")


def import_vmas() -> Any:
    """The vmas module, or a ScenarioError saying how to install it."""
    try:
        import vmas
    except ImportError as exc:
        raise ScenarioError(f"this scenario runs on VMAS, which is not installed ({exc})", INSTALL_FIX) from None
    return vmas


def vmas_task_names() -> list[str]:
    """The task names VMAS ships: its own scenarios, the MPE ports and the debug scenarios."""
    vmas = import_vmas()
    return sorted(set(vmas.scenarios) | set(vmas.mpe_scenarios) | set(vmas.debug_scenarios))


def _make_task(task: Any) -> Any:
    """A fresh VMAS scenario object: by name, from a BaseScenario subclass, or the object itself."""
    import_vmas()
    if isinstance(task, str):
        if task not in vmas_task_names():
            raise ScenarioError(f"VMAS has no task named {task!r}",
                                f"use one of: {', '.join(vmas_task_names())}, or pass your BaseScenario class")
        from vmas.scenarios import load
        return load(task + ".py").Scenario()
    from vmas.simulator.scenario import BaseScenario
    if inspect.isclass(task) and issubclass(task, BaseScenario):
        return task()
    if isinstance(task, BaseScenario):
        return task
    raise ScenarioError(f"cannot build a VMAS task from {task!r}",
                        "pass a VMAS task name (str) or a vmas.simulator.scenario.BaseScenario subclass")


def _device(device: str) -> Any:
    import torch
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"VMAS device {device!r} but torch sees no CUDA device", "use sim_device=cpu")
    try:
        return torch.device(device)
    except RuntimeError:
        raise ConfigError(f"VMAS device {device!r} is not a torch device",
                          "use sim_device=cpu or sim_device=cuda") from None


class VmasBatch(BatchedEnv):
    """E copies of one VMAS task, stepped as one vectorised VMAS env (see the module docstring)."""

    def __init__(self, task: Any, n_envs: int, *, max_steps: int | None = 100, continuous_actions: bool = True,
                 device: str = "cpu", seed: int | None = None, **task_kwargs: Any) -> None:
        import torch
        import_vmas()
        from vmas import make_env
        if int(n_envs) < 1:
            raise ConfigError(f"n_envs={n_envs}", "use at least one env copy")
        self.torch = torch
        self.device = _device(device)
        scenario = _make_task(task)
        name = task if isinstance(task, str) else type(scenario).__name__
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.env = make_env(scenario, num_envs=int(n_envs), device=self.device,
                                    continuous_actions=bool(continuous_actions), max_steps=max_steps, seed=seed,
                                    terminated_truncated=True, **task_kwargs)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ScenarioError(f"VMAS could not build task {name!r} with {task_kwargs}: {exc}",
                                "check the task's parameters") from None
        for w in caught:
            if "not used by the scenario" in str(w.message):     # VMAS only warns about unknown parameters
                raise ScenarioError(f"VMAS task {name!r}: {w.message}",
                                    "drop or rename that parameter (see the task's make_world in vmas.scenarios)")
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self.n_envs = E = int(n_envs)
        agents = self.env.agents
        self.units = [a.name for a in agents]
        U = len(self.units)
        if not all(type(sp).__name__ == "Box" and len(sp.shape) == 1 for sp in self.env.observation_space):
            raise ScenarioError(f"VMAS task {task!r} gives non-vector observations {self.env.observation_space}",
                                "make the task's observation() return one flat tensor [E, D] per agent")
        self._widths = [int(sp.shape[0]) for sp in self.env.observation_space]
        D = max(self._widths)
        self._padded = len(set(self._widths)) > 1
        self.obs_space = gym.spaces.Box(-np.inf, np.inf, (D,), np.float32)
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (U * D,), np.float32)
        self.action_space, self._low, self._high = self._action_spaces(list(self.env.action_space))
        self.action_mask = None
        self.obs = np.zeros((E, U, D), np.float32)
        self.alive = np.zeros((E, U), bool)
        self._infos: list[dict] = []
        self._info_means: dict[str, np.ndarray] | None = None
        self._terminated = np.zeros(E, bool)

    # ---- spaces -------------------------------------------------------------------------------
    def _action_spaces(self, spaces: list) -> tuple[gym.Space, Any, Any]:
        """One action space for every unit, plus per-unit clip bounds [U, A] for Box actions."""
        first = spaces[0]
        if all(type(sp).__name__ == "Discrete" for sp in spaces):
            sizes = {int(sp.n) for sp in spaces}
            if len(sizes) > 1:
                raise ScenarioError(f"the VMAS agents' Discrete action spaces differ in size {sorted(sizes)}",
                                    "use continuous_actions=true, or a task whose agents share one action space")
            return gym.spaces.Discrete(int(first.n)), None, None
        if all(type(sp).__name__ == "Box" for sp in spaces):
            shapes = {sp.shape for sp in spaces}
            if len(shapes) > 1:
                raise ScenarioError(f"the VMAS agents' action vectors differ in length {sorted(shapes)}",
                                    "use a task whose agents share one action size (one policy drives every unit)")
            low = np.stack([np.asarray(sp.low, np.float32) for sp in spaces])
            high = np.stack([np.asarray(sp.high, np.float32) for sp in spaces])
            space = gym.spaces.Box(low.min(axis=0), high.max(axis=0), dtype=np.float32)
            t = self.torch
            return space, t.as_tensor(low, device=self.device), t.as_tensor(high, device=self.device)
        raise ScenarioError(f"VMAS action spaces {[type(sp).__name__ for sp in spaces]} are not supported",
                            "use continuous_actions=true or false (not multidiscrete)")

    # ---- conversions --------------------------------------------------------------------------
    def _obs_array(self, obs: list) -> np.ndarray:
        """Agents' observation tensors [E, D_i] -> numpy [E, U, D] (one host copy)."""
        if not self._padded:
            return self.torch.stack(obs, dim=1).cpu().numpy()
        out = self.torch.zeros((self.n_envs, len(obs), self.obs.shape[2]), device=self.device)
        for i, o in enumerate(obs):
            out[:, i, :o.shape[1]] = o
        return out.cpu().numpy()

    def _actions(self, actions: np.ndarray) -> list:
        """hdppo actions [E, U] or [E, U, A] -> VMAS's list of per-agent tensors."""
        t = self.torch
        if self._low is None:
            a = t.as_tensor(np.asarray(actions).reshape(self.n_envs, -1), device=self.device).long()
            return [a[:, i:i + 1] for i in range(a.shape[1])]
        a = t.as_tensor(np.asarray(actions, np.float32), device=self.device)
        a = t.maximum(t.minimum(a, self._high), self._low)
        return [a[:, i] for i in range(a.shape[1])]

    # ---- BatchedEnv ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        obs = self.env.reset(seed=seed)
        self.obs[:] = self._obs_array(obs)
        self.alive[:] = True
        self._terminated[:] = False

    def reset_done(self, mask: np.ndarray) -> None:
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return
        if len(idx) == self.n_envs:
            self.reset()
            return
        for i in idx:
            self.env.reset_at(int(i), return_observations=False)
        (obs,) = self.env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False,
                                            get_dones=False)
        self.obs[idx] = self._obs_array(obs)[idx]
        self.alive[idx] = True
        self._terminated[idx] = False

    def step(self, actions: np.ndarray) -> EnvStep:
        was_alive = self.alive.copy()
        obs, rews, terminated, truncated, self._infos = self.env.step(self._actions(actions))
        self._info_means = None
        new_obs = self._obs_array(obs)
        # some tasks give rewards [E, 1]
        rewards = self.torch.stack([r.reshape(self.n_envs) for r in rews], dim=1).cpu().numpy()
        rewards = rewards.astype(np.float32, copy=False)
        term = terminated.reshape(self.n_envs).cpu().numpy().astype(bool)
        trunc = truncated.reshape(self.n_envs).cpu().numpy().astype(bool) & ~term
        if was_alive.all():
            self.obs[:] = new_obs
        else:                                     # a copy left done (no autoreset) keeps its last view
            self.obs[:] = np.where(was_alive[..., None], new_obs, self.obs)
            rewards = np.where(was_alive, rewards, np.float32(0.0))
        t_units = was_alive & term[:, None]
        tr_units = was_alive & trunc[:, None]
        self.alive &= ~(t_units | tr_units)
        self._terminated |= term & was_alive.any(axis=1)
        return EnvStep(rewards, t_units, tr_units, np.asarray(~self.alive.any(axis=1)))

    def state(self) -> np.ndarray:
        return self.obs.reshape(self.n_envs, -1).copy()

    def positions(self) -> np.ndarray:
        """Every unit's (x, y) [E, U, 2], for spatial grouping."""
        pos = self.torch.stack([a.state.pos for a in self.env.agents], dim=1)
        return pos[..., :2].cpu().numpy()

    def episode_info(self, env_index: int) -> dict[str, float]:
        if self._info_means is None:           # once per step: every info key, mean over agents, [E]
            self._info_means = {}
            for key in (self._infos[0] if self._infos else {}):
                try:
                    vals = [info[key].reshape(self.n_envs, -1).float().mean(dim=1) for info in self._infos]
                    self._info_means[key] = self.torch.stack(vals, dim=1).mean(dim=1).cpu().numpy()
                except (TypeError, RuntimeError, KeyError, AttributeError):
                    continue                   # a non-numeric or oddly shaped info entry: skip it
        out = {"terminated": float(self._terminated[env_index])}
        out.update({k: float(v[env_index]) for k, v in self._info_means.items()})
        return out

    def close(self) -> None:
        self.env = None


# ---- a one-copy PettingZoo view, for PettingZoo's API test ----------------------------------------
def _parallel_view(batch: VmasBatch) -> Any:
    """hdppo.sims.BatchParallelEnv over a one-copy VmasBatch, taking Box actions too."""
    from hdppo.sims.parallel_view import BatchParallelEnv

    class VmasParallelEnv(BatchParallelEnv):
        metadata = {"name": "hdppo_vmas_v0", "render_modes": []}

        def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
            if not isinstance(self.batch.action_space, gym.spaces.Box) or not self.agents:
                return super().step(actions)
            act = np.zeros((1, len(self.possible_agents)) + self.batch.action_space.shape, np.float32)
            for agent, a in actions.items():
                act[0, self._index[agent]] = np.asarray(a, np.float32)
            live = self.agents
            res = self.batch.step(act)
            idx = [self._index[a] for a in live]
            out = ({a: self.batch.obs[0, i].copy() for a, i in zip(live, idx)},
                   {a: float(res.rewards[0, i]) for a, i in zip(live, idx)},
                   {a: bool(res.terminated[0, i]) for a, i in zip(live, idx)},
                   {a: bool(res.truncated[0, i]) for a, i in zip(live, idx)},
                   self._infos(live))
            self.agents = [a for a, i in zip(live, idx) if self.batch.alive[0, i]]
            return out

    return VmasParallelEnv(batch)


# ---- any VMAS task as an hdppo scenario ----------------------------------------------------------
def _field_type(value: Any) -> Any:
    if isinstance(value, bool):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    if isinstance(value, str):
        return str
    if value is None:
        return int | None
    raise ConfigError(f"VMAS task parameter default {value!r} is a {type(value).__name__}",
                      "give task parameters as bool, int, float or str defaults")


def _hdppo_keys() -> set[str]:
    """The keys of every scenario config (ScenarioConfig: gamma, w_ext, shared_reward, ...): never task parameters."""
    from hdppo.team.scenario import ScenarioConfig
    return {f.name for f in dataclasses.fields(ScenarioConfig)}


def vmas_config(cls_name: str, *, max_steps: int = 100, continuous_actions: bool = True, layers: int = 1,
                squad_size: int = 2, goals: int = 4, gamma: float = 0.99, **task: Any) -> type:
    """A config dataclass: the adapter's keys (max_steps, continuous_actions, sim_device: where VMAS
    simulates; not `device`, which `hdppo train` routes to the training config), the team's
    (layers 1 or 3, squad_size, goals) and one field per VMAS task parameter with its default."""
    from hdppo.team.scenario import ScenarioConfig
    fields = [("max_steps", int, max_steps), ("continuous_actions", bool, continuous_actions),
              ("sim_device", str, "cpu"), ("layers", int, layers), ("squad_size", int, squad_size),
              ("goals", int, goals), ("gamma", float, gamma)]
    for key, value in task.items():
        if key in ADAPTER_KEYS or key in _hdppo_keys():
            raise ConfigError(f"task parameter {key!r} clashes with an hdppo config key", "rename or drop it")
        fields.append((key, _field_type(value), value))
    return dataclasses.make_dataclass(cls_name, [(k, t, dataclasses.field(default=v)) for k, t, v in fields],
                                      bases=(ScenarioConfig,))


def task_kwargs(cfg: Any) -> dict[str, Any]:
    """The VMAS task parameters of a vmas_scenario config (every field hdppo does not own)."""
    own = set(ADAPTER_KEYS) | _hdppo_keys()
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in own}


def make_vmas_batch(task: Any, cfg: Any, n_envs: int, seed: int | None) -> VmasBatch:
    """The VmasBatch of a vmas_scenario config."""
    if cfg.max_steps < 1:
        raise ConfigError(f"max_steps={cfg.max_steps}", "give VMAS tasks a time limit: max_steps >= 1")
    return VmasBatch(task, n_envs, max_steps=cfg.max_steps, continuous_actions=cfg.continuous_actions,
                     device=cfg.sim_device, seed=seed, **task_kwargs(cfg))


def team_graph(cfg: Any, agents: Sequence[str]) -> Any:
    """Flat (layers=1), or commander -> squads of squad_size -> units (layers=3)."""
    from hdppo.team.graph import AgentGraph
    if cfg.layers not in (1, 3):
        raise ConfigError(f"layers={cfg.layers}", "use layers=1 (flat) or layers=3 (commander -> squads -> units)")
    return AgentGraph.team(list(agents), cfg.layers, cfg.squad_size)


def team_layers(cfg: Any) -> list:
    """Flat: one unit layer. Three layers: the commander and the squads each pick one of `goals`
    discrete goals per child (one-hot), every 10 and 5 steps; what a goal means is learned."""
    from hdppo.team.scenario import Layer
    if cfg.layers == 1:
        return [Layer("low")]
    goal: gym.spaces.Discrete = gym.spaces.Discrete(int(cfg.goals))
    return [Layer("high", interval=10, goal_space=goal), Layer("mid", interval=5, goal_space=goal), Layer("low")]


def vmas_scenario(task: Any, *, name: str | None = None, description: str = "",
                  make_layers: Callable[[Any], list] | None = None,
                  make_graph: Callable[[Any, Sequence[str]], Any] | None = None, **defaults: Any) -> Any:
    """An hdppo Scenario over a VMAS task (a name from vmas.scenarios or a BaseScenario subclass).

    `defaults` set the config: `max_steps`, `continuous_actions`, `sim_device`, `layers` (1 flat, 3 commander ->
    squads -> units), `squad_size`, `goals`, `gamma`, and any other key is a VMAS task parameter
    (`n_agents=4`), overridable with key=value like every scenario key. `make_layers(cfg)` /
    `make_graph(cfg, agents)` replace the generic team (team_layers / team_graph) with your own.
    """
    from hdppo.team.scenario import Scenario
    label = name or (task if isinstance(task, str) else getattr(task, "__name__", "vmas_task"))
    config = vmas_config(f"Vmas_{label}_Config".replace("-", "_"), **defaults)

    def batched(cfg: Any, n_envs: int, seed: int | None) -> VmasBatch:
        return make_vmas_batch(task, cfg, n_envs, seed)

    def env(cfg: Any) -> Any:
        return _parallel_view(make_vmas_batch(task, cfg, 1, None))

    return Scenario(name=f"vmas_{label}" if name is None else name,
                    description=description or f"VMAS {label}: a flat team, or squads with layers=3",
                    env=env, graph=make_graph or team_graph, layers=make_layers or team_layers, config=config,
                    batched_env=batched, positions=lambda e: e.positions())
