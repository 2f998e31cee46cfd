"""HostEnv: one env copy whose observations come from the caller, so the hierarchy runs without
owning the simulator.

The caller (a game loop, a robot fleet, a remote simulator) writes each step's per-unit
observations with `write`; `HierarchyEnv.decide` then takes the layers' decisions over this
one-copy BatchedEnv as training's step does, and returns the units' actions for the caller to
apply (`step` only records them, for a HierarchyEnv that steps it).

What scenario hooks may read from `ctx.env` here: `obs` [1, U, D], `alive` [1, U],
`action_mask` [1, U, A] or None, `state()` [1, Ds] (the `state` the caller gave), `positions()`
[1, U, 2] (the `positions` the caller gave, else the simulator's), `t`; any other attribute is
looked up on the `sim` object the caller passes (for example the scenario's own simulator).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError, ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep


@dataclass
class UnitSpaces:
    """How a scenario's env presents its units: what the hierarchy was trained on."""

    units: list[str]
    opponents: list[str]
    obs_space: gym.spaces.Box             # flat (and padded) per unit, as the policies see it
    action_space: gym.Space               # per unit (padded to the largest)
    raw_obs: dict[str, gym.Space]         # each unit's own observation space (dict masks removed)
    raw_action: dict[str, gym.Space]      # each unit's own action space
    state_space: gym.spaces.Box | None
    mask_base: np.ndarray | None          # [U, A] legal actions by padding alone, None without masks


def probe_spaces(scenario: Any, cfg: Any, specs: list) -> UnitSpaces:
    """Build the scenario's env once (one copy) to read its units and spaces, then close it."""
    from hdppo.team.assembly import make_env_and_graph
    env, graph = make_env_and_graph(scenario, cfg, 1, None, specs)
    try:
        units = cast(list[str], list(graph.units))   # the leaves, checked to be the env's agent names
        opponents = list(getattr(env, "opponents", []))
        raw_obs: dict[str, gym.Space] = {}
        raw_action: dict[str, gym.Space] = {}
        spaces = getattr(env, "raw_spaces", None)
        for u in units:
            if spaces is not None:
                o, a = spaces[u]
                if isinstance(o, gym.spaces.Dict) and "observation" in o.spaces:
                    o = o["observation"]
            else:
                o, a = env.obs_space, env.action_space
            raw_obs[u], raw_action[u] = o, a
        mask = getattr(env, "_mask_base", None)
        if mask is None and env.action_mask is not None:
            mask = np.ones(env.action_mask.shape[1:], bool)
        return UnitSpaces(units, opponents, env.obs_space, env.action_space, raw_obs, raw_action,
                          env.state_space, None if mask is None else np.asarray(mask, bool).copy())
    finally:
        env.close()


def _split_mask(ob: Any, info: Any) -> tuple[Any, Any]:
    """A unit's observation and its action mask: from {"observation", "action_mask"}, else from its
    info's "action_mask", else None."""
    mask = None
    if isinstance(ob, Mapping) and "observation" in ob:
        mask, ob = ob.get("action_mask"), ob["observation"]
    if mask is None and isinstance(info, Mapping):
        mask = info.get("action_mask")
    return ob, mask


class HostEnv(BatchedEnv):
    """A BatchedEnv of one copy filled by the caller; see the module docstring."""

    def __init__(self, spaces: UnitSpaces) -> None:
        self.spaces = spaces
        self.n_envs = 1
        self.units = list(spaces.units)
        self.opponents = list(spaces.opponents)
        self._opponents = set(self.opponents)
        self.obs_space = spaces.obs_space
        self.action_space = spaces.action_space
        self.state_space = spaces.state_space
        self._index = {u: i for i, u in enumerate(self.units)}
        U, D = len(self.units), int(spaces.obs_space.shape[0])
        self.obs = np.zeros((1, U, D), np.float32)
        self.alive = np.ones((1, U), bool)
        self.action_mask = None if spaces.mask_base is None else spaces.mask_base[None].copy()
        self.actions: np.ndarray | None = None
        self.sim: Any = None
        self._state: np.ndarray | None = None
        self._positions: np.ndarray | None = None

    # ---- what the caller gives -------------------------------------------------------------
    def write(self, observations: Mapping[str, Any], infos: Mapping[str, Any] | None = None,
              agents: Iterable[str] | None = None, state: Any = None, positions: Any = None,
              sim: Any = None) -> None:
        """This step's observations (a dead unit keeps its last one), living units, masks and extras."""
        unknown = [a for a in observations if a not in self._index and a not in self._opponents]
        if unknown and len(unknown) == len(observations):   # others' entries (opponents) are ignored
            raise ConfigError(f"observations name agent {unknown[0]!r}, which is not a unit of this team",
                              f"pass the env's per-agent observations; the team's units are {self.units[:6]}...")
        living = set(observations if agents is None else agents)
        infos = infos or {}
        rows, flat, masks = [], [], []
        for unit, ob in observations.items():
            i = self._index.get(unit)
            if i is not None:
                ob, mask = _split_mask(ob, infos.get(unit))
                rows.append(i)
                flat.append(self._flat(unit, ob))
                masks.append(mask)
        if rows:                                   # one write of all rows: no per-unit numpy calls
            self.obs[0, rows] = flat
            self._write_masks(rows, masks)
        self._check_finite()
        was = self.alive[0].copy()
        self.alive[0] = [u in living and was[i] for i, u in enumerate(self.units)]
        self._state = None if state is None else np.asarray(state, np.float32).reshape(1, -1)   # per step
        self._positions = None if positions is None else self._unit_array(positions, "positions")
        if sim is not None:
            self.sim = sim

    def _write_masks(self, rows: list[int], masks: list[Any]) -> None:
        """Units' legal actions: the padding's, narrowed by the mask each unit was given (if any)."""
        if self.action_mask is None or self.spaces.mask_base is None:     # both set, or neither
            return
        base = self.spaces.mask_base
        given = np.array([base[i] if m is None else m for i, m in zip(rows, masks)], bool)
        self.action_mask[0, rows] = base[rows] & given.reshape(len(rows), -1)

    def revive(self) -> None:
        """A new episode: every unit alive again (the next write says which really are)."""
        self.alive[:] = True

    def _flat(self, unit: str, ob: Any) -> np.ndarray:
        space = self.spaces.raw_obs[unit]
        if isinstance(space, gym.spaces.Box) or not isinstance(space, gym.spaces.Space):
            flat = np.asarray(ob, np.float32).reshape(-1)
        else:
            flat = np.asarray(gym.spaces.flatten(space, ob), np.float32)
        D = self.obs.shape[2]
        if flat.shape[0] > D:
            raise ConfigError(f"unit {unit!r} got an observation of {flat.shape[0]} values, the team's policies "
                              f"take {D}", "pass the observation the scenario's env gives for that unit")
        if flat.shape[0] < D:                  # SuperSuit's padding: zeros at the end
            flat = np.concatenate([flat, np.zeros(D - flat.shape[0], np.float32)])
        return flat

    def _check_finite(self) -> None:
        """Refuse NaN or infinite observations before any layer acts on them, naming the unit."""
        bad = ~np.isfinite(self.obs[0])
        if bad.any():
            unit = self.units[int(np.argwhere(bad)[0, 0])]
            raise ConfigError(f"the observation of unit {unit!r} holds a non-finite value (NaN or inf)",
                              "pass finite observations (clip or replace NaN / inf) to team.act")

    def _unit_array(self, value: Any, what: str) -> np.ndarray:
        if isinstance(value, Mapping):
            arr = np.zeros((len(self.units), 2), np.float32)
            for u, v in value.items():
                arr[self._index[u]] = v
        else:
            arr = np.asarray(value, np.float32).reshape(len(self.units), -1)
        return arr[None]

    # ---- BatchedEnv ------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Nothing to do: the caller resets its simulator and writes the first observations."""

    def reset_done(self, mask: np.ndarray) -> None:
        """Nothing to do (the team never auto-resets)."""

    def step(self, actions: np.ndarray) -> EnvStep:
        """Record the units' actions for the caller; rewards are the caller's business (zeros here)."""
        self.actions = np.array(actions, copy=True)
        U = len(self.units)
        return EnvStep(np.zeros((1, U), np.float32), np.zeros((1, U), bool), np.zeros((1, U), bool),
                       np.asarray(~self.alive.any(axis=1)))

    def state(self) -> np.ndarray:
        if self._state is not None:
            return self._state
        if self.sim is not None and hasattr(self.sim, "state"):
            return np.asarray(self.sim.state(), np.float32).reshape(1, -1)
        raise ScenarioError("a layer of this team reads the env's global state, but none was given",
                            "pass state=env.state() to team.act (or sim= an object with a state() method)")

    def positions(self) -> np.ndarray:
        if self._positions is not None:
            return self._positions
        if self.sim is not None and hasattr(self.sim, "positions"):
            return np.asarray(self.sim.positions(), np.float32).reshape(1, len(self.units), -1)
        raise ScenarioError("this team groups units by position at reset, but no positions were given",
                            "pass positions={unit: (x, y)} (or sim=) to the first team.act of an episode")

    def __getattr__(self, name: str) -> Any:
        sim = self.__dict__.get("sim")
        if sim is not None and not name.startswith("__"):
            return getattr(sim, name)
        raise AttributeError(f"HostEnv has no {name!r}: a scenario hook reads it from the simulator; "
                             f"pass sim=<that simulator> to team.act")
