"""JaxMARL (multi-agent envs in JAX: SMAX, MPE, ...) as a native hdppo batched env and scenario.

`JaxmarlBatch` wraps ONE JaxMARL env, vmapped over E copies and jitted: a step of every copy is one
compiled call (no per-copy Python loop), and its outputs cross to numpy once per step
(`np.asarray`, measured faster than DLPack here: docs/scenarios/smax.md).

`jaxmarl_scenario(env, ...)` turns any JaxMARL env (a registered name for `jaxmarl.make`, or a
function of keyword parameters that builds one) into an hdppo `Scenario`: a config dataclass with
the env's parameters, a flat team (`layers=1`), or commander -> squads -> units (`layers=3`).

Mapping (JaxMARL -> hdppo):
- units: `env.agents` (for HeuristicEnemySMAX the allies; the heuristic enemy runs inside the step);
- observations: each agent's vector -> `obs` [E, U, D] float32 (narrower agents zero-padded);
  `state()` is the env's `world_state` observation when it gives one, else every agent's
  observation concatenated;
- actions: Discrete (one size for every agent) or Box; `action_mask` from `get_avail_actions`
  (Discrete only);
- rewards: each unit's JaxMARL reward;
- deaths (`dead_units`): a unit whose own done turns true before the episode's has died. With
  `dead_units="stay"` (the default, JaxMARL's own semantics) it stays in the team until the episode
  ends, takes only its legal actions (SMAX: stop) and keeps its JaxMARL reward: SMAX pays the dead
  the team's reward "to allow for noble sacrifice", and JaxMARL's baselines credit an agent's
  actions with everything its team earns until the episode's end. With `dead_units="leave"` it
  leaves the episode at its death (`terminated`, no reward after), as a PettingZoo agent does: the
  actions that led to a sacrifice are then credited with nothing the team earns after it;
- ends: at the episode's end (`done["__all__"]`) the units still in it are `terminated` when the
  game decided it and `truncated` (bootstrapped) at the time limit. Subclasses say which (`ends`):
  by default an env with `max_steps` whose step count reached it ended by the time limit;
- resets: each step also builds a fresh start for every copy, as JaxMARL's own `step` does for its
  auto-reset (`key, key_reset = split(key)`); `reset_done(mask)` swaps in the fresh starts of the
  masked copies with one jitted select, so stepping then `reset_done(done)` equals JaxMARL's `step`;
- seeding: copy e's key is `PRNGKey(seed + e)`; each step splits it (`key, k = split(key)`) and
  passes `k` to JaxMARL's step, so E copies stepped together equal E single copies with the same
  seeds, run to run;
- `episode_info(e)`: `terminated` (1.0: the game decided the episode) plus a subclass's `metrics`
  (SMAX: `win`), read from the last state before the reset.

JAX runs on the CPU (`JAX_PLATFORMS=cpu` unless the user set it) with one thread per process
(`XLA_FLAGS` unless the user set it): hdppo's workers are processes, one core each. Compiled
steps are kept in JAX's persistent compilation cache (`~/.cache/hdppo/jax`, `HDPPO_JAX_CACHE=DIR`
or `off`; a cache the user configured for JAX wins), so a worker, eval or check starts without
compiling a step another process compiled before.
"""
from __future__ import annotations

import dataclasses
import io
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError, ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep
from hdppo.sims.parallel_view import BatchParallelEnv

INSTALL_FIX = "pip install 'hdppo[smax]' (JaxMARL needs Python >= 3.11; or: pip install jaxmarl==0.2.0)"
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
# fields of a jaxmarl_scenario config that configure the team, not the JaxMARL env
TEAM_KEYS = ("layers", "squad_size", "goals", "use_state", "dead_units")
DEAD_UNITS = ("stay", "leave")      # the first is the default; see the module docstring


CACHE_ENV = "HDPPO_JAX_CACHE"      # JAX's persistent compilation cache: a folder, or "off"


def compile_cache_dir() -> str | None:
    """Where JAX keeps compiled programs between processes: $HDPPO_JAX_CACHE, else
    $XDG_CACHE_HOME/hdppo/jax (~/.cache/hdppo/jax); None with HDPPO_JAX_CACHE=off."""
    given = os.environ.get(CACHE_ENV, "").strip()
    if given.lower() in ("off", "0", "false", "none"):
        return None
    if given:
        return os.path.abspath(os.path.expanduser(given))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hdppo", "jax")


def use_compile_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (compile_cache_dir) unless the user configured one
    (JAX_COMPILATION_CACHE_DIR or jax.config): every worker process, eval and check of a JaxMARL
    scenario otherwise compiles the same vmapped step again (SMAX 2s3z: ~15 s each). Returns the
    folder in use."""
    import jax
    current = getattr(jax.config, "jax_compilation_cache_dir", None)
    if current:
        return str(current)
    folder = compile_cache_dir()
    if folder is not None:
        jax.config.update("jax_compilation_cache_dir", folder)
    return folder


def import_jaxmarl() -> Any:
    """The jaxmarl module (JAX on the CPU, one thread, its compilation cache on), or a ScenarioError
    saying how to install it."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_FLAGS", ONE_THREAD)
    saved = sys.stdout, sys.stderr, sys.__stdout__
    try:
        # jaxmarl prints which optional envs it found, after its MABrax module set sys.stdout and
        # sys.stderr to sys.__stdout__ / __stderr__: silence the print, then restore all three
        sys.stdout = quiet = io.StringIO()
        setattr(sys, "__stdout__", quiet)   # noqa: B010 - sys.__stdout__ is Final to type checkers
        import jaxmarl
    except ImportError as exc:
        raise ScenarioError(f"this scenario runs on JaxMARL, which is not installed ({exc})", INSTALL_FIX) from None
    finally:
        sys.stdout, sys.stderr = saved[:2]
        setattr(sys, "__stdout__", saved[2])   # noqa: B010
    use_compile_cache()
    return jaxmarl


def make_env(env: str | Callable[..., Any], **params: Any) -> Any:
    """A JaxMARL env: `jaxmarl.make(env, **params)` for a registered name, else `env(**params)`."""
    jaxmarl = import_jaxmarl()
    if isinstance(env, str):
        if env not in jaxmarl.registered_envs:
            raise ScenarioError(f"JaxMARL has no env named {env!r}",
                                f"use one of: {', '.join(jaxmarl.registered_envs)}, or pass a function that builds one")
        build: Callable[..., Any] = partial(jaxmarl.make, env)
    else:
        build = env
    try:
        return build(**params)
    except (TypeError, ValueError, KeyError) as exc:
        raise ScenarioError(f"JaxMARL could not build {env!r} with {params}: {exc}",
                            "check the env's parameters (its __init__ in jaxmarl.environments)") from None


def _space(space: Any) -> gym.Space:
    """A JaxMARL space as a gymnasium one (Discrete or Box)."""
    if hasattr(space, "num_categories") or type(space).__name__ == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    if type(space).__name__ == "Box":
        shape = tuple(space.shape)
        return gym.spaces.Box(np.broadcast_to(np.asarray(space.low, np.float32), shape),
                              np.broadcast_to(np.asarray(space.high, np.float32), shape), dtype=np.float32)
    raise ScenarioError(f"JaxMARL space {type(space).__name__} is not supported", "use Discrete or Box actions")


class JaxmarlBatch(BatchedEnv):
    """E copies of one JaxMARL env, vmapped and jitted (see the module docstring).

    Subclasses adapt a family of envs by overriding `ends` and `metrics` (jax functions of one copy).
    """

    def __init__(self, env: Any, n_envs: int, seed: int | None = None, dead_units: str = DEAD_UNITS[0]) -> None:
        import_jaxmarl()
        import jax
        if int(n_envs) < 1:
            raise ConfigError(f"n_envs={n_envs}", "use at least one env copy")
        if dead_units not in DEAD_UNITS:
            raise ConfigError(f"dead_units={dead_units!r} is not one of {list(DEAD_UNITS)}",
                              "pass dead_units=stay (the dead stay until the episode ends, as in JaxMARL) or "
                              "dead_units=leave (they leave the episode when they die)")
        self.dead_units = dead_units
        self.jax, self.env = jax, env
        self.n_envs = E = int(n_envs)
        self.units = list(env.agents)
        U = len(self.units)
        widths = [int(np.prod(env.observation_spaces[a].shape)) for a in self.units]
        self._width = D = max(widths)
        self.obs_space = gym.spaces.Box(-np.inf, np.inf, (D,), np.float32)
        self.action_space = self._action_space([_space(env.action_spaces[a]) for a in self.units])
        self._discrete = isinstance(self.action_space, gym.spaces.Discrete)
        probe = jax.eval_shape(self._start, jax.random.PRNGKey(0))
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (int(probe[1]["world"].shape[0]),), np.float32)
        self._masked = self._discrete and probe[1]["avail"] is not None
        self._step_fn, self._start_fn = self._compiled()
        self.obs = np.zeros((E, U, D), np.float32)
        self.alive = np.zeros((E, U), bool)
        n_act = self.action_space.n if isinstance(self.action_space, gym.spaces.Discrete) else 0
        self.action_mask = np.zeros((E, U, n_act), bool) if self._masked else None
        self._world = np.zeros((E, self.state_space.shape[0]), np.float32)
        self._keys = self._seed_keys(seed)
        self._state: Any = None
        self._fresh: Any = None           # (state, view) of the next episode of every copy, on the device
        self._metrics: Any = None         # device arrays of the last step's episode metrics [E]
        self._info_np: dict[str, np.ndarray] | None = None
        self._decisive = np.zeros(E, bool)   # copies whose last step ended their episode by the game

    # ---- setup ---------------------------------------------------------------------------------
    def _action_space(self, spaces: list[gym.Space]) -> gym.Space:
        if len({repr(sp) for sp in spaces}) > 1:
            raise ScenarioError(f"the JaxMARL agents' action spaces differ: {sorted({repr(sp) for sp in spaces})}",
                                "use an env whose trained agents share one action space (one policy drives every unit)")
        return spaces[0]

    def _compiled(self) -> tuple[Callable, Callable]:
        """The vmapped, jitted step and start, one pair per (class, env) in a process: a second batch
        of the same env (another E, the one-copy view) reuses the compilation cache of the first."""
        key = (type(self), self.env)
        if key not in _COMPILED:
            _COMPILED[key] = (self.jax.jit(self.jax.vmap(self._one_step)), self.jax.jit(self.jax.vmap(self._start)))
        return _COMPILED[key]

    def _seed_keys(self, seed: int | None) -> Any:
        """Copy e's key PRNGKey(seed + e) [E, 2]; fresh entropy without a seed."""
        jnp = self.jax.numpy
        seeds = (np.random.SeedSequence().generate_state(self.n_envs) if seed is None
                 else np.arange(self.n_envs) + int(seed))
        return jnp.stack([self.jax.random.PRNGKey(int(s)) for s in seeds])

    # ---- one copy, in JAX (vmapped and jitted above) ------------------------------------------
    def _view(self, obs: dict, state: Any) -> dict[str, Any]:
        """One copy's obs [U, D], world state [S] and avail actions [U, A] (None when there are none)."""
        jnp = self.jax.numpy
        rows = [jnp.ravel(obs[a]).astype(jnp.float32) for a in self.units]
        o = jnp.stack([jnp.pad(r, (0, self._width - r.shape[0])) for r in rows])
        world = jnp.ravel(obs["world_state"]).astype(jnp.float32) if "world_state" in obs else jnp.ravel(o)
        avail = None
        if self._discrete:
            try:
                av = self.env.get_avail_actions(state)
                avail = jnp.stack([av[a] for a in self.units]).astype(bool)
            except (NotImplementedError, AttributeError, KeyError):
                avail = None
            if avail is not None and avail.shape[-1] != getattr(self.action_space, "n", None):
                avail = None
        return {"obs": o, "world": world, "avail": avail}

    def _start(self, key: Any) -> tuple[Any, dict]:
        obs, state = self.env.reset(key)
        # strong dtypes, as a step returns them: a weakly typed leaf would make the second step recompile
        state = self.jax.tree.map(lambda x: self.jax.lax.convert_element_type(x, x.dtype), state)
        return state, self._view(obs, state)

    def _one_step(self, key: Any, state: Any, actions: Any) -> tuple:
        """JaxMARL's `step` split in two: the step without its auto-reset, and the reset it would do."""
        jax, jnp = self.jax, self.jax.numpy
        key, k = jax.random.split(key)
        k_step, k_reset = jax.random.split(k)
        act = {a: actions[i] for i, a in enumerate(self.units)}
        obs, state, rew, dones, _ = self.env.step_env(k_step, state, act)
        fresh = self._start(k_reset)
        unit_done = jnp.stack([dones[a] for a in self.units])
        died, decisive = self.ends(state, unit_done, dones["__all__"])
        out = {"rewards": jnp.stack([rew[a] for a in self.units]).astype(jnp.float32), "died": died,
               "done": dones["__all__"], "decisive": decisive, **self._view(obs, state)}
        return key, state, fresh, out, self.metrics(state)

    def ends(self, state: Any, unit_done: Any, done: Any) -> tuple[Any, Any]:
        """(died [U]: units out before the episode's end, decisive: the game, not the time limit,
        ended it) of one copy after a step. Default: a unit done before `__all__` died; an env with
        `max_steps` whose `state.step` reached it ended by the time limit."""
        limit, step = getattr(self.env, "max_steps", None), getattr(state, "step", None)
        decisive = True if limit is None or step is None else step < limit
        return unit_done & ~done, self.jax.numpy.asarray(decisive)

    def metrics(self, state: Any) -> dict[str, Any]:
        """Episode metrics of one copy's state (jax scalars), reported when its episode ends."""
        return {}

    # ---- BatchedEnv ----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._keys = self._seed_keys(seed)
        self._keys, k = self._split(self._keys)
        self._state, view = self._start_fn(k)
        self._fresh = (self._state, view)
        self._read_view(view, np.ones(self.n_envs, bool))
        self.alive[:] = True
        self._metrics = self._info_np = None

    def _split(self, keys: Any) -> tuple[Any, Any]:
        pair = self.jax.vmap(self.jax.random.split)(keys)
        return pair[:, 0], pair[:, 1]

    def _read_view(self, view: dict, mask: np.ndarray) -> None:
        """Copy the masked copies' obs, world state and mask from device arrays."""
        idx = np.flatnonzero(mask)
        every = len(idx) == self.n_envs
        for name, dest in (("obs", self.obs), ("world", self._world), ("avail", self.action_mask)):
            if dest is not None:
                src = np.asarray(view[name])
                dest[...] = src if every else np.where(mask.reshape((-1,) + (1,) * (src.ndim - 1)), src, dest)

    def reset_done(self, mask: np.ndarray) -> None:
        mask = np.asarray(mask, bool)
        if not mask.any():
            return
        if self._state is None:
            self.reset()
            return
        fresh_state, view = self._fresh
        self._state = _select(self.jax.numpy.asarray(mask), fresh_state, self._state)
        self._read_view(view, mask)
        self.alive[mask] = True

    def step(self, actions: np.ndarray) -> EnvStep:
        if self._state is None:
            self.reset()
        jnp = self.jax.numpy
        a = np.asarray(actions)
        if self._discrete:
            if a.shape != self.alive.shape:
                raise ValueError(f"actions have shape {a.shape}, expected {self.alive.shape}")
            a = a.astype(np.int32, copy=False)
        else:
            a = a.astype(np.float32, copy=False)
        live = self.alive.copy()
        self._keys, self._state, self._fresh, out, self._metrics = self._step_fn(self._keys, self._state,
                                                                               jnp.asarray(a))
        self._info_np = None
        rewards = np.where(live, np.asarray(out["rewards"]), np.float32(0.0))
        died = np.asarray(out["died"]) if self.dead_units == "leave" else np.zeros_like(live)
        done, decisive = np.asarray(out["done"]), np.asarray(out["decisive"])
        terminated = live & (died | (done & decisive)[:, None])
        truncated = live & ~terminated & (done & ~decisive)[:, None]
        self.obs[:] = np.where(live[..., None], np.asarray(out["obs"]), self.obs)
        self._world[:] = np.asarray(out["world"])
        if self.action_mask is not None:
            self.action_mask[:] = np.asarray(out["avail"])
        self.alive = live & ~(terminated | truncated)
        self._decisive = decisive & done
        return EnvStep(rewards, terminated, truncated, np.asarray(~self.alive.any(axis=1)))

    def state(self) -> np.ndarray:
        return self._world.copy()

    def episode_info(self, env_index: int) -> dict[str, float]:
        if self._info_np is None:
            self._info_np = {k: np.asarray(v) for k, v in (self._metrics or {}).items()}
        out = {"terminated": float(self._decisive[env_index])}
        out.update({k: float(v[env_index]) for k, v in self._info_np.items()})
        return out

    def close(self) -> None:
        self._state = self._fresh = self._metrics = None


_COMPILED: dict[tuple, tuple[Callable, Callable]] = {}


def _select_where(mask: Any, fresh: Any, state: Any) -> Any:
    """Per copy: the fresh state where mask [E], else the current one (every leaf [E, ...])."""
    import jax
    import jax.numpy as jnp
    return jax.tree.map(lambda f, s: jnp.where(mask.reshape((-1,) + (1,) * (s.ndim - 1)), f, s), fresh, state)


def _select(mask: Any, fresh: Any, state: Any) -> Any:
    """_select_where, jitted once per process."""
    global _SELECT
    if _SELECT is None:
        import jax
        _SELECT = jax.jit(_select_where)
    return _SELECT(mask, fresh, state)


_SELECT: Callable | None = None


# ---- one copy behind PettingZoo's API, rendered when the batch draws a scene ---------------------
class JaxmarlParallelEnv(BatchParallelEnv):
    """One copy of a JaxmarlBatch as a PettingZoo ParallelEnv; legal actions in infos["action_mask"]."""

    metadata = {"name": "hdppo_jaxmarl_v0", "render_modes": ["rgb_array"]}

    def __init__(self, batch: JaxmarlBatch, render_mode: str | None = None) -> None:
        super().__init__(batch, mask_in_infos=True, render_mode=render_mode,
                         scene=copy_scene if hasattr(batch, "scene") else None)


def copy_scene(env: Any) -> Any:
    """The Scene of a one-copy view: its batch's scene of copy 0 (batches that draw one have `scene`)."""
    return env.batch.scene(0)


# ---- any JaxMARL env as an hdppo scenario -----------------------------------------------------------
FIELD_TYPES: dict[type, Any] = {bool: bool, int: int, float: float, str: str}


def _field_of(key: str, value: Any, what: str) -> tuple[str, Any, Any]:
    if type(value) not in FIELD_TYPES:
        raise ConfigError(f"JaxMARL {what} {key}={value!r} is a {type(value).__name__}",
                          "give them as bool, int, float or str defaults (build others in your env fn)")
    return key, FIELD_TYPES[type(value)], value


def jaxmarl_config(cls_name: str, *, layers: int = 1, squad_size: int = 2, goals: int = 4, use_state: bool = False,
                   dead_units: str = DEAD_UNITS[0], gamma: float = 0.99, team_keys: dict[str, Any] | None = None,
                   **params: Any) -> type:
    """A config dataclass: the team's keys (layers 1 or 3, squad_size, goals, use_state: the units
    see `state()` too, dead_units: stay or leave, and a family's own `team_keys`, never passed to
    the env) and one field per JaxMARL env parameter with its default."""
    from hdppo.sims.vmas import _hdppo_keys
    from hdppo.team.scenario import ScenarioConfig
    fields = [("layers", int, layers), ("squad_size", int, squad_size), ("goals", int, goals),
              ("use_state", bool, use_state), ("dead_units", str, dead_units), ("gamma", float, gamma)]
    own = [_field_of(k, v, "team key") for k, v in (team_keys or {}).items()]
    for key, value in params.items():
        if key in TEAM_KEYS or key in _hdppo_keys() or key in (team_keys or {}):
            raise ConfigError(f"env parameter {key!r} clashes with an hdppo config key", "rename or drop it")
        fields.append(_field_of(key, value, "env parameter"))
    from hdppo.team.scenario import BEFORE
    changed = {"dead_units": {BEFORE: DEAD_UNITS[1]}}      # runs made before the key took the dead out
    return dataclasses.make_dataclass(
        cls_name, [(k, t, dataclasses.field(default=v, metadata=changed.get(k, {}))) for k, t, v in fields]
        + [(k, t, dataclasses.field(default=v, metadata={"team": True})) for k, t, v in own], bases=(ScenarioConfig,))


def env_params(cfg: Any) -> dict[str, Any]:
    """The JaxMARL env parameters of a jaxmarl_scenario config (every field hdppo does not own)."""
    from hdppo.sims.vmas import _hdppo_keys
    own = set(TEAM_KEYS) | _hdppo_keys()
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
            if f.name not in own and not f.metadata.get("team")}


_ENVS: dict[tuple, Any] = {}


def cached_env(env: str | Callable[..., Any], params: dict[str, Any]) -> Any:
    """One JaxMARL env object per (env, parameters) in a process, so its jitted steps compile once."""
    key = (env, tuple(sorted(params.items())))
    if key not in _ENVS:
        _ENVS[key] = make_env(env, **params)
    return _ENVS[key]


def jaxmarl_scenario(env: str | Callable[..., Any], *, name: str | None = None, description: str = "",
                     batch: type[JaxmarlBatch] = JaxmarlBatch, make_layers: Callable[[Any], list] | None = None,
                     make_graph: Callable[[Any, Sequence[str]], Any] | None = None,
                     goal_xy: Callable[..., Any] | None = None, **defaults: Any) -> Any:
    """An hdppo Scenario over a JaxMARL env: a name registered with `jaxmarl.make`, or a function
    of keyword parameters that builds a JaxMARL env.

    `defaults` set the config: `layers` (1 flat, 3 commander -> squads -> units), `squad_size`,
    `goals`, `use_state` (append the env's world state to the units' features), `dead_units`
    (`stay`: the dead stay in the team until the episode ends, keeping their reward, as in JaxMARL;
    `leave`: they leave at their death; see the module docstring), `gamma`; any other
    key is an env parameter (`max_steps=50`), overridable with key=value like every scenario key;
    `team_keys={"hier": False}` adds config keys of the family's own team that the env never sees.
    `batch` is the JaxmarlBatch subclass for the env's family (SMAX: SmaxBatch); `make_layers(cfg)` /
    `make_graph(cfg, agents)` replace the generic team. A batch class with `positions()` feeds spatial
    grouping, one with `scene(e)` draws `hdppo render`'s frames.
    """
    from hdppo.sims.vmas import team_graph, team_layers
    from hdppo.team.scenario import Scenario
    label = name or (env if isinstance(env, str) else getattr(env, "__name__", "jaxmarl_env"))
    config = jaxmarl_config(f"Jaxmarl_{label}_Config".replace("-", "_"), **defaults)

    def batched(cfg: Any, n_envs: int, seed: int | None) -> JaxmarlBatch:
        return batch(cached_env(env, env_params(cfg)), n_envs, seed, dead_units=cfg.dead_units)

    def layers(cfg: Any) -> list:
        out = list(make_layers(cfg) if make_layers is not None else team_layers(cfg))
        return [dataclasses.replace(out[0], use_state=True)] + out[1:] if cfg.use_state else out

    return Scenario(name=name or f"jaxmarl_{label}",
                    description=description or f"JaxMARL {label}: a flat team, or squads with layers=3",
                    env=lambda cfg: JaxmarlParallelEnv(batched(cfg, 1, None)), graph=make_graph or team_graph,
                    layers=layers, config=config, batched_env=batched,
                    positions=(lambda e: e.positions()) if hasattr(batch, "positions") else None,
                    scene=copy_scene if hasattr(batch, "scene") else None, goal_xy=goal_xy)
