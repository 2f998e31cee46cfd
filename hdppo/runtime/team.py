"""Team: a trained hierarchy that acts inside the caller's own loop, one env step per `act`.

`hdppo.load(RUN)` builds it from a run folder. The team keeps the hierarchy's bookkeeping itself
(decision intervals, goals and their grounding, aggregation over living children, deaths) by
running the same HierarchyEnv as training over a HostEnv that holds the caller's observations:
`HierarchyEnv.decide` takes the decisions of training's step, without the rewards and transitions
only training reads.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError, ScenarioError
from hdppo.runtime.goal_books import OrderedBook, replace_book
from hdppo.runtime.host_env import HostEnv, probe_spaces
from hdppo.runtime.orders import group_orders
from hdppo.team.controllers import scripted_policy, uniform_policy
from hdppo.team.episodes import members
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.interfaces import Decision, LayerInfo
from hdppo.team.scenario import Scenario

LayerPolicy = Callable[[Decision], np.ndarray]


@dataclass
class LayerDescription:
    """One layer of a loaded team, as `team.layers` lists it."""

    name: str
    index: int
    interval: int                     # env steps between its decisions
    nodes: list[str]
    choice: str | None                # per_child / broadcast, None for the units
    goal_space: gym.Space | None      # the goals it gives its children (None for the units)
    action_space: gym.Space           # its decision: the env action (units) or goal_space
    obs_dim: int                      # width of one decision slot's observation
    slots: list[str]
    acting: str                       # checkpoint / scripted / uniform
    checkpoint: str | None = None


def acting_scenario(scenario: Scenario) -> Scenario:
    """The scenario without its reward-only hooks (intrinsic, goal_success): acting never needs them,
    and in a caller-driven env they could read simulator state the caller does not give."""
    def layers(cfg: Any) -> list:
        return [dataclasses.replace(layer, intrinsic=None, goal_success=None) for layer in scenario.layers(cfg)]
    return dataclasses.replace(scenario, layers=layers)


class Team:
    """A loaded team; see the module docstring. Build it with `hdppo.load(run)`.

    Per episode: `reset(seed)`, then `actions = act(observations)` once per env step, where
    `observations` maps each living unit to its observation as the scenario's PettingZoo env gives
    it (opponents' entries are ignored); `actions` maps each living unit to its action. Orders:
    `act(observations, goals={node: goal})`; `scripted={layer: fn}` replaces a layer's policy.
    """

    def __init__(self, scenario: Scenario, cfg: Any, checkpoints: Mapping[str, str], deterministic: bool = False,
                 seed: int = 0, scripted: Mapping[str, LayerPolicy] | None = None) -> None:
        self.scenario, self.cfg = scenario, cfg
        self.deterministic = deterministic
        specs = scenario.build_layers(cfg)
        self.env = HostEnv(probe_spaces(scenario, cfg, specs))
        # placeholders until the first act gives real positions and state
        self.env._positions = np.zeros((1, len(self.env.units), 2), np.float32)
        if self.env.state_space is not None:
            self.env._state = np.zeros((1,) + self.env.state_space.shape, np.float32)
        self.hier = HierarchyEnv(acting_scenario(scenario), cfg, n_envs=1, autoreset=False, env=self.env)
        self.env._positions = self.env._state = None
        self.units = list(self.env.units)
        self._trim = self._action_trims()
        names = [info.name for info in self.hier.info]
        self._scripted = dict(scripted or {})
        for layer in self._scripted:
            if layer not in names:
                raise ConfigError(f"scripted= names layer {layer!r}, which the team does not have",
                                  f"script one of the layers {names}")
        # who receives goals (every node below the top), and books that keep the caller's orders
        self._receivers = {str(n): (i, k) for i in range(1, self.hier.n_layers)
                           for k, n in enumerate(self.hier.info[i].nodes)}
        self._books = {i: replace_book(self.hier, i, OrderedBook) for i in range(1, self.hier.n_layers)}
        self._seed = int(seed)
        self._loaded: dict[str, Any] = {info.name: self._load_policy(info, checkpoints[info.name])
                                        for info in self.hier.info if info.name in checkpoints}
        self._build_actors(self._seed)
        self.layers = [self._describe(info, spec) for info, spec in zip(self.hier.info, self.hier.specs)]
        self._fresh = True
        self._done = False

    # ---- how layers act (torch here; hdppo.runtime.onnx_team overrides these three) -----------
    def _load_policy(self, info: LayerInfo, path: str) -> Any:
        from hdppo.runtime.actors import load_policy
        return load_policy(info, path)

    def _policy_actor(self, info: LayerInfo, loaded: Any) -> LayerPolicy:
        from hdppo.runtime.actors import policy_actor
        return policy_actor(info, loaded, self.deterministic)

    def _seed_streams(self, seed: int) -> None:
        from hdppo.engine.torch_stream import TorchStream
        self._stream = TorchStream(seed)        # the team's own torch random stream, as a worker's

    def _rng(self) -> AbstractContextManager:
        """Where the layers' sampling draws from while the team acts (overridable, as OnnxTeam does)."""
        return self._stream.active()

    def _build_actors(self, seed: int) -> None:
        self._seed_streams(seed)
        self._actors: list[LayerPolicy] = []
        self._acting: list[str] = []
        for info, spec in zip(self.hier.info, self.hier.specs):
            own_seed = seed + 7 * (info.index + 1)          # as a training worker's fixed layer
            if info.name in self._scripted:     # the caller's script replaces whatever the run left
                self._actors.append(scripted_policy(info, self._scripted[info.name], own_seed))
                self._acting.append("scripted")
            elif info.name in self._loaded:
                self._actors.append(self._policy_actor(info, self._loaded[info.name]))
                self._acting.append("checkpoint")
            elif spec.scripted is not None:     # as a training worker: scripted, else uniform
                self._actors.append(scripted_policy(info, spec.scripted, own_seed))
                self._acting.append("scripted")
            else:
                self._actors.append(uniform_policy(info, own_seed))
                self._acting.append("uniform")

    def _describe(self, info: LayerInfo, spec: Any) -> LayerDescription:
        loaded = self._loaded.get(info.name)
        return LayerDescription(info.name, info.index, info.interval, [str(n) for n in info.nodes], info.choice,
                                spec.goal_space, info.action_space, info.obs_dim, list(info.slot_names),
                                self._acting[info.index], None if loaded is None else str(loaded.path))

    # ---- the caller's loop -----------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Start a new episode; the next `act` gets its first observations. With a seed, the team's
        sampling streams (stochastic actors, uniform layers) restart from it."""
        if seed is not None:
            self._build_actors(int(seed))
        self._fresh = True
        self._done = False
        self.env.revive()

    def act(self, observations: Mapping[str, Any], infos: Mapping[str, Any] | None = None, *,
            agents: Iterable[str] | None = None, state: Any = None, positions: Any = None,
            sim: Any = None, goals: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The actions of the living units for this env step.

        observations: unit -> observation (a Box array, or {"observation", "action_mask"}); units
        missing from it (or from `agents`, the env's living agents, when given) are dead from now on.
        infos: unit -> info dict; an "action_mask" there restricts that unit's actions.
        state: the env's global state, for layers with use_state. positions: unit -> (x, y) at the
        episode's first step, for teams grouped by position. sim: an object whose attributes the
        scenario's hooks read (e.g. the warehouse's simulator), see hdppo.runtime.host_env.
        goals: node -> goal, orders that replace what those nodes' parents give them: each named
        node holds its goal from this step, also where its parent decides now; without an order
        it keeps its goal until its parent next decides (pass the order every step to hold it).
        """
        if self._done:
            raise ConfigError("this episode is over (no unit of the team is alive)",
                              "call team.reset() before acting in a new episode")
        orders = group_orders(goals, self._receivers, [s.goal_space for s in self.hier.specs]) if goals else None
        self.env.write(observations, infos, agents, state, positions, sim)
        try:
            if self._fresh:
                self.hier.reset()
                self._fresh = False
            else:
                self.hier.refresh()
            if not self.env.alive.any():
                self._done = True
                return {}
            with self._rng():
                if orders:
                    actions = self._decide_ordered(orders)
                else:
                    actions = self.hier.decide(self._decide)
        except AttributeError as exc:
            raise ScenarioError(f"a hook of scenario {self.scenario.name!r} read something the caller did not "
                                f"give ({exc})", "pass sim=<the simulator the hooks read> to team.act") from exc
        return self._unit_actions(actions[0])

    def goals(self) -> dict[str, dict[str, Any]]:
        """The goal each node currently holds, per layer that receives goals: {layer: {node: goal}}."""
        out: dict[str, dict[str, Any]] = {}
        for i in range(1, self.hier.n_layers):
            info = self.hier.info[i]
            layer_goals = self.hier.goals[i]
            assert layer_goals is not None           # every layer below the top receives goals
            goals = layer_goals[0]
            out[info.name] = {str(n): _plain(goals[k]) for k, n in enumerate(info.nodes)}
        return out

    def members(self) -> dict[str, list[str]]:
        """The units under each node of the layer above the units, in this episode's grouping."""
        if self.hier.n_layers < 2:
            return {}
        i = self.hier.n_layers - 2
        groups = members(self.hier, i, 0)
        return {str(n): [self.units[u] for u in g] for n, g in zip(self.hier.info[i].nodes, groups)}

    @property
    def t(self) -> int:
        """Env steps acted in this episode."""
        return int(self.hier.t[0])

    # ---- internals -------------------------------------------------------------------------
    def _decide(self, d: Decision) -> np.ndarray:
        return self._actors[d.layer](d)

    def _decide_ordered(self, orders: dict[int, dict[int, np.ndarray]]) -> np.ndarray:
        """This step's decisions with the ordered nodes holding their goals."""
        try:
            for i, layer_orders in orders.items():
                self._books[i].hold(layer_orders)
            return self.hier.decide(self._decide)
        finally:
            for i in orders:
                self._books[i].release()

    def _unit_actions(self, acts: np.ndarray) -> dict[str, Any]:
        """The living units' actions from the units' action array [U, ...]."""
        alive = self.env.alive[0].tolist()
        if acts.ndim == 1:                            # one number per unit: Python ints / floats
            values = acts.tolist()
            return {u: values[i] for i, u in enumerate(self.units) if alive[i]}
        return {u: acts[i][self._trim[i]].copy() for i, u in enumerate(self.units) if alive[i]}

    def _action_trims(self) -> list[tuple[slice, ...]]:
        """Per unit, the part of the padded action array that is its own (SuperSuit pads smaller Boxes)."""
        out = []
        for unit in self.units:
            raw = self.env.spaces.raw_action.get(unit)
            if isinstance(raw, gym.spaces.Box) and raw.shape != self.env.action_space.shape:
                out.append(tuple(slice(0, k) for k in raw.shape))
            else:
                out.append(())
        return out


def _plain(a: np.ndarray) -> Any:
    """Scalars as Python ints / floats, arrays as numpy arrays."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a.item()
    return a.copy()


def load(run: str | Path, *, deterministic: bool = False, seed: int | None = None,
         overrides: Mapping[str, Any] | None = None, allow_untrained: bool = False, trust_run: bool | None = None,
         scenario: str | None = None, checkpoint: str = "latest",
         scripted: Mapping[str, LayerPolicy] | None = None) -> Team:
    """The team of a `hdppo train` run folder, ready for `reset()` / `act(observations)`.

    Layers act as the run left them: from the run's checkpoints (or the checkpoints it loaded
    frozen), else with the scenario's scripted controller, else uniformly. `overrides` change
    scenario keys (e.g. {"difficulty": 0.8}); the trained layers' spaces must not change. A layer
    the run trained but never saved is refused unless `allow_untrained` (it then acts scripted or
    uniformly). `seed` seeds stochastic actors and uniform layers (default: the run's seed).

    The scenario is the recorded built-in or project name, or the file the run was trained on while
    it is unchanged; `scenario` (a name or a path) loads another; the run folder's own copy of the
    scenario file (RUN/scenario.py) runs only with `trust_run=True` (docs/deploy.md). `checkpoint`:
    "latest" (the newest commit) or "best" (RUN/best, the best evaluation during training).
    `scripted` {layer: fn} drives those layers by the caller's fn(decision) -> actions, as a Layer's
    `scripted` hook would (e.g. your own commander over trained units).
    """
    from hdppo.runfolder import check_team, load_run_config, resolve_scenario, untrained_layers
    from hdppo.team.scenario import load_scenario
    config = load_run_config(run)
    missing = untrained_layers(run, config, checkpoint)
    if missing and not allow_untrained:
        raise ConfigError(f"run {run} trained layer {missing[0]!r} but holds no checkpoint of it",
                          "train longer (checkpoints are written as training goes), or pass "
                          "allow_untrained=True / --allow-untrained to act with its scripted or uniform policy")
    loaded = load_scenario(resolve_scenario(run, config, trust_run=trust_run, scenario=scenario))
    values = dict(config.get("scenario_overrides", {}))
    values.update({k: str(v) if not isinstance(v, str) else v for k, v in (overrides or {}).items()})
    cfg = loaded.make_config(values)
    if seed is None:
        from hdppo.engine.worker import worker_seed
        seed = worker_seed(int(config.get("train", {}).get("seed", 0)), 0)
    return Team(loaded, cfg, check_team(run, config, checkpoint), deterministic=deterministic, seed=seed,
                scripted=scripted)
