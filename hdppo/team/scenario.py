"""Scenario, Layer and config specs, and loading `scenarios/NAME.py` or any file path.

A scenario module defines `SCENARIO = Scenario(...)`. Everything a scenario gives is a plain
function of its config, so one module serves every size and variant the config allows.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import itertools
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.overrides import apply_overrides

if TYPE_CHECKING:  # imported for annotations only
    from hdppo.sims.base import BatchedEnv
    from hdppo.team.graph import AgentGraph

Choice = Literal["per_child", "broadcast"]


BEFORE = "before"    # field metadata: the value a key's behaviour had in runs made before the key existed


@dataclass
class ScenarioConfig:
    """Base config every scenario config extends. Override with key=value or YAML.

    A key added with a default that changes what runs do carries `metadata={BEFORE: VALUE}`: VALUE
    reproduces the runs made before it (reports compare such a run as if it had recorded VALUE).

    w_ext / w_int / interval / shared_reward are per-layer maps (`w_int.low=0.5`,
    `shared_reward.low=true`); a layer missing from a map takes the default of its Layer spec
    (w_ext 1.0, shared_reward False).
    """

    gamma: float = 0.99
    w_ext: dict[str, float] = field(default_factory=dict)
    w_int: dict[str, float] = field(default_factory=dict)
    interval: dict[str, int] = field(default_factory=dict)
    shared_reward: dict[str, bool] = field(default_factory=dict)


class LayerContext:
    """What scenario hooks of one layer see: arrays over env copies E and the layer's nodes N.

    features [E, N, D] the nodes' own features (no goal); alive [E, N] nodes with a living unit;
    goals [E, N] int or [E, N, G] float from the parent; goal_features [E, N, F] those goals
    grounded; t [E] the env step inside the episode; env the BatchedEnv (native scenarios expose
    state on it). Upper layers also have child_features [E, N, C, Dc] and child_alive [E, N, C], and
    child_goals [E, N, C] (Discrete; [E, N, C, *shape] for Box) the goals the children hold now, with
    child_holds [E, N, C]: the child holds a goal given since its episode began.
    intrinsic and goal_success run after the env step; prev_features / prev_goal_features hold the
    state before it. For goal_features and goal_success the nodes are those receiving the goals.
    Optional fields are computed only when a hook reads them (None where they do not apply).
    `observe` has no `features`: it computes them, from child_features and child_alive.
    """

    features: np.ndarray
    alive: np.ndarray

    OPTIONAL = ("goals", "goal_features", "t", "env", "child_features", "child_alive", "child_goals",
                "child_holds", "prev_features", "prev_goal_features")

    def __init__(self, features: np.ndarray | Callable[[], np.ndarray] | None, alive: np.ndarray,
                 goals: np.ndarray | None = None,
                 goal_features: Any = None, t: np.ndarray | None = None, env: Any = None,
                 child_features: Any = None, child_alive: Any = None, prev_features: Any = None,
                 prev_goal_features: Any = None, child_goals: Any = None, child_holds: Any = None) -> None:
        self.alive = alive
        self._lazy: dict[str, Callable[[], Any]] = {}
        if callable(features):
            self._lazy["features"] = features
        elif features is not None:
            self.features = features
        given = dict(goals=goals, goal_features=goal_features, t=t, env=env, child_features=child_features,
                     child_alive=child_alive, prev_features=prev_features, prev_goal_features=prev_goal_features,
                     child_goals=child_goals, child_holds=child_holds)
        for name, value in given.items():
            if callable(value) and name not in ("env",):
                self._lazy[name] = value            # computed on first read
            elif value is not None:                 # an unset field stays unset, so a lazy value added
                setattr(self, name, value)          # later (prev_features) is not hidden by a None

    def __getattr__(self, name: str) -> Any:
        lazy = self.__dict__.get("_lazy", {})
        if name in lazy:
            value = lazy.pop(name)()
            setattr(self, name, value)
            return value
        if name in LayerContext.OPTIONAL:
            return None
        if name == "features":
            raise AttributeError("LayerContext.features is not given to a Layer's observe hook, which computes "
                                 "the layer's features: build them from ctx.child_features and ctx.child_alive")
        raise AttributeError(f"LayerContext has no field {name!r}")


@dataclass(frozen=True)
class Entities:
    """Where a layer's own features list entities: `count` blocks of `size` features from `offset`."""

    offset: int
    size: int
    count: int

    @property
    def end(self) -> int:
        return self.offset + self.size * self.count


@dataclass
class Layer:
    """One layer of the team. Upper layers declare their children's goal space and how they choose.

    goal_features(goals, child_ctx) -> [E, Nc, F] grounds goals for the children (default: one-hot
    for Discrete, the raw vector for Box); goal_success(child_ctx) -> bool [E, Nc] says whether each
    child has reached its goal; intrinsic(ctx) -> [E, N] is this layer's own reward term, weighted by
    w_int; observe(ctx) -> [E, N, D] replaces the default masked mean/max/fraction-alive features;
    scripted(decision) -> actions drives the layer when it is not trained (scripted(decision, rng) for
    one that draws at random: it gets a seeded numpy Generator). With shared_reward every
    node of the layer receives the team's total env reward (the sum over all units of its copy)
    instead of the sum over its own units. attend(goals, ctx) -> bool keep-mask, on a layer that
    receives goals, filters the nodes' own features in their observation: [E, N, entities.count] per
    entity of the declared `entities` block (features outside it are always kept), else [E, N, D];
    dropped features read 0 (hooks and parents still see them all). goal_mask(ctx) -> bool [E, N, n],
    on a layer with a Discrete(n) goal space, says which goals each node may give its children at
    this decision (see hdppo.team.goal_mask).
    """

    name: str
    interval: int = 1
    goal_space: gym.Space | None = None
    choice: Choice = "per_child"
    goal_features: Callable[[np.ndarray, LayerContext], np.ndarray] | None = None
    goal_features_space: gym.spaces.Box | None = None
    goal_success: Callable[[LayerContext], np.ndarray] | None = None
    intrinsic: Callable[[LayerContext], np.ndarray] | None = None
    w_int: float = 0.0
    w_ext: float = 1.0
    observe: Callable[[LayerContext], np.ndarray] | None = None
    observe_space: gym.spaces.Box | None = None
    use_state: bool = False
    scripted: Callable[[Any], np.ndarray] | None = None
    shared_reward: bool = False
    attend: Callable[[np.ndarray, LayerContext], np.ndarray] | None = None
    entities: Entities | None = None
    goal_mask: Callable[[LayerContext], np.ndarray] | None = None


@dataclass
class Opponents:
    """Env agents outside the graph and the controller that drives them.

    `agents(possible_agents) -> names`; `controller(cfg, env) -> act` where
    `act(observations: dict[agent, obs]) -> dict[agent, action]` for one env copy.
    """

    agents: Callable[[Sequence[str]], Sequence[str]]
    controller: Callable[[Any, Any], Callable[[dict], dict]]

    @classmethod
    def random(cls, agents: Callable[[Sequence[str]], Sequence[str]], seed: int = 0) -> Opponents:
        """Opponents that sample their action spaces (legal actions only), each env copy its own stream."""
        import itertools

        from hdppo.sims.pettingzoo import random_opponent
        counter = itertools.count()
        return cls(agents, lambda cfg, env: random_opponent(seed)(next(counter), env))


@dataclass
class Scenario:
    """A PettingZoo env, an agent graph and layer specs, all built from one config dataclass.

    env(cfg) -> ParallelEnv; graph(cfg, possible_agents) -> AgentGraph; layers(cfg) -> [Layer, ...]
    top to bottom. batched_env(cfg, n_envs, seed) -> BatchedEnv is optional: native scenarios give
    it so workers step many copies with numpy; otherwise copies of env(cfg) are stepped in a loop.
    positions(env) -> [E, U, 2] feeds spatial grouping at reset. scene(env) and goal_xy(env, cfg, layer, goals)
    let `hdppo render` draw an episode of the one-copy PettingZoo env (see hdppo.runtime.render).
    episode_info(env) -> {metric: number} reports a PettingZoo scenario's episode metrics: called on
    a copy (as env(cfg) returned it) when its episode ends, before its reset; eval, plot and
    TensorBoard show them (a native batch implements BatchedEnv.episode_info(e) instead).
    """

    name: str
    description: str
    env: Callable[[Any], Any]
    graph: Callable[[Any, Sequence[str]], AgentGraph]
    layers: Callable[[Any], Sequence[Layer]]
    config: type = ScenarioConfig
    batched_env: Callable[[Any, int, int | None], BatchedEnv] | None = None
    opponents: Opponents | None = None
    positions: Callable[[Any], np.ndarray] | None = None
    source: str = ""
    scene: Callable[[Any], Any] | None = None        # scene(pettingzoo_env) -> hdppo.sims.Scene
    goal_xy: Callable[[Any, Any, str, np.ndarray], np.ndarray] | None = None   # (env, cfg, layer, goals) -> [N, 2]
    episode_info: Callable[[Any], dict[str, float]] | None = None   # episode_info(pettingzoo_env) -> metrics

    def make_config(self, overrides: dict[str, Any] | None = None) -> Any:
        """The scenario's config with overrides applied; errors name the scenario."""
        from hdppo.errors import ConfigError
        try:
            cfg = apply_overrides(self.config(), overrides or {}, what=f"scenario {self.name!r} config")
        except ConfigError as exc:
            raise ScenarioError(exc.problem, exc.fix, where=f"scenario {self.name!r}") from None
        gamma = getattr(cfg, "gamma", 0.99)
        if not (isinstance(gamma, (int, float)) and 0.0 < gamma <= 1.0):
            raise ConfigError(f"value {gamma!r} for 'gamma' is out of range",
                              "pass gamma in (0, 1] (the discount of every layer's SMDP returns)")
        return cfg

    def build_layers(self, cfg: Any) -> list[Layer]:
        """The layer specs with config overrides applied, validated (goal spaces, intervals, names)."""
        where = f"scenario {self.name!r}"
        try:
            layers = list(self.layers(cfg))
        except ScenarioError:     # the scenario refused its config on purpose: its message is the answer
            raise
        except Exception as exc:  # a bug in the user's layers() function
            raise ScenarioError(f"layers(cfg) raised {type(exc).__name__}: {exc}",
                                "fix the layers function of the scenario (run with --debug for the traceback)",
                                where=where) from exc
        if not layers:
            raise ScenarioError("layers(cfg) returned no layers", "return at least one Layer", where=where)
        names = [getattr(layer, "name", None) for layer in layers]
        if len(set(names)) != len(names):
            raise ScenarioError(f"layer names repeat: {names}", "give every layer its own name", where=where)
        for key in ("w_ext", "w_int", "interval", "shared_reward"):
            unknown = set(getattr(cfg, key, {}) or {}) - set(names)
            if unknown:
                raise ScenarioError(f"config {key} names unknown layer {sorted(unknown)[0]!r}",
                                    f"use one of the layers {names}", where=where)
        out = []
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise ScenarioError(f"layers(cfg)[{i}] is a {type(layer).__name__}, not an hdppo Layer",
                                    "build each layer with hdppo.Layer(...)", where=where)
            layer = dataclasses.replace(
                layer,
                interval=int(cfg.interval.get(layer.name, layer.interval)),
                w_ext=float(cfg.w_ext.get(layer.name, layer.w_ext)),
                w_int=float(cfg.w_int.get(layer.name, layer.w_int)),
                shared_reward=bool((getattr(cfg, "shared_reward", None) or {}).get(layer.name, layer.shared_reward)))
            _check_layer(layer, bottom=(i == len(layers) - 1), where=where)
            _check_attend(layer, top=(i == 0), where=where)
            out.append(layer)
        for upper, lower in itertools.pairwise(out):
            if upper.interval % lower.interval != 0:
                raise ScenarioError(
                    f"layer {upper.name!r} has interval {upper.interval}, not a multiple of layer "
                    f"{lower.name!r}'s interval {lower.interval}",
                    f"set interval.{upper.name} to a multiple of {lower.interval}", where=where)
        return out


def _check_layer(layer: Layer, *, bottom: bool, where: str) -> None:
    if layer.interval < 1:
        raise ScenarioError(f"layer {layer.name!r} has interval {layer.interval}", "use an interval >= 1", where=where)
    if layer.choice not in ("per_child", "broadcast"):
        raise ScenarioError(f"layer {layer.name!r} has choice {layer.choice!r}",
                            "use choice='per_child' or choice='broadcast'", where=where)
    if bottom:
        if layer.observe is not None:
            raise ScenarioError(f"bottom layer {layer.name!r} sets observe, but units observe the env directly",
                                "drop observe from the bottom layer (wrap the env to change unit observations)",
                                where=where)
        if layer.goal_space is not None:
            raise ScenarioError(f"bottom layer {layer.name!r} declares a goal_space, but it has no children",
                                "drop goal_space from the bottom layer", where=where)
        if layer.goal_mask is not None:
            raise ScenarioError(f"bottom layer {layer.name!r} sets goal_mask, but it gives no goals",
                                "drop goal_mask from the bottom layer (units' legal actions come from the env's "
                                "action mask)", where=where)
        return
    space = layer.goal_space
    if space is None:
        raise ScenarioError(f"layer {layer.name!r} has children but no goal_space",
                            "set goal_space=gymnasium.spaces.Discrete(n) or Box(...) on it", where=where)
    if not isinstance(space, gym.Space):
        raise ScenarioError(f"layer {layer.name!r} declares goal_space {space!r}, which is not a Gymnasium space",
                            "use gymnasium.spaces.Discrete(n) or gymnasium.spaces.Box(low, high, shape)", where=where)
    if not isinstance(space, (gym.spaces.Discrete, gym.spaces.Box)):
        raise ScenarioError(f"layer {layer.name!r} declares a {type(space).__name__} goal space",
                            "goal spaces are Discrete or Box", where=where)
    if layer.goal_mask is not None and not isinstance(space, gym.spaces.Discrete):
        raise ScenarioError(f"layer {layer.name!r} sets goal_mask on a {type(space).__name__} goal space",
                            "goal_mask masks the goals of a Discrete goal space; drop it or use Discrete(n)",
                            where=where)
    if layer.goal_features is not None and layer.goal_features_space is None:
        raise ScenarioError(f"layer {layer.name!r} gives goal_features but no goal_features_space",
                            "set goal_features_space=Box(low, high, (F,)) for the grounded features", where=where)
    if layer.observe is not None and layer.observe_space is None:
        raise ScenarioError(f"layer {layer.name!r} gives observe but no observe_space",
                            "set observe_space=Box(low, high, (D,))", where=where)


def _check_attend(layer: Layer, *, top: bool, where: str) -> None:
    if layer.attend is not None and top:
        raise ScenarioError(f"layer {layer.name!r} sets attend, but as the top layer it receives no goals",
                            "set attend on a layer below the top (the children whose observations it filters)",
                            where=where)
    ent = layer.entities
    if ent is not None and layer.attend is None:
        raise ScenarioError(f"layer {layer.name!r} declares entities but no attend",
                            "set attend=(goals, ctx) -> bool [E, N, entities.count], or drop entities", where=where)
    if ent is not None and not (ent.offset >= 0 and ent.size >= 1 and ent.count >= 1):
        raise ScenarioError(f"layer {layer.name!r} declares {ent}", "use offset >= 0, size >= 1 and count >= 1",
                            where=where)


# ---- loading -------------------------------------------------------------------------------------
SCENARIO_PACKAGE = "hdppo.scenarios"
USER_FOLDER = "scenarios"       # a user's project: ./scenarios/NAME.py, found before the built-ins


def _user_folder() -> Path | None:
    """./scenarios of the user's project, unless it is hdppo's own built-in folder (a source checkout)."""
    folder = Path.cwd() / USER_FOLDER
    if not folder.is_dir():
        return None
    built_in = importlib.import_module(SCENARIO_PACKAGE).__path__
    return None if any(folder.resolve() == Path(p).resolve() for p in built_in) else folder


def user_scenario(name: str) -> Path | None:
    """./scenarios/NAME.py, or the package ./scenarios/NAME/__init__.py, when the user's project
    (the current folder) has it."""
    folder = _user_folder()
    if folder is None:
        return None
    for path in (folder / f"{name}.py", folder / name / "__init__.py"):
        if path.is_file():
            return path
    return None


def scenario_names() -> list[tuple[str, str]]:
    """(name, where) of every scenario `hdppo train NAME` finds: ./scenarios/*.py first, then the
    built-ins a local file of the same name does not shadow."""
    folder = _user_folder()
    found = ([p.stem for p in folder.glob("*.py")] + [p.parent.name for p in folder.glob("*/__init__.py")]
             if folder else [])
    local = sorted(n for n in found if not n.startswith("_"))
    pkg = importlib.import_module(SCENARIO_PACKAGE)
    built_in = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    return ([(n, f"./{USER_FOLDER}/{n}" + ("/" if (Path(USER_FOLDER) / n).is_dir() else ".py")) for n in local]
            + [(n, "built-in") for n in built_in if n not in local])


def list_scenarios() -> list[Scenario]:
    """Every scenario `hdppo scenarios` lists, loaded."""
    return [load_scenario(name) for name, _ in scenario_names()]


def resolve_scenario_name(name_or_path: str) -> str:
    """What a run records: a file path as given, a user's ./scenarios/NAME.py as its absolute path (so
    workers, eval and resume find it from any folder), a built-in as its name."""
    if _looks_like_path(name_or_path):
        return name_or_path
    local = user_scenario(name_or_path)
    return str(local.resolve()) if local is not None else name_or_path


def load_scenario(name_or_path: str) -> Scenario:
    """Load a scenario by name (./scenarios/NAME.py, else the built-in NAME) or by a Python file's path."""
    local = None if _looks_like_path(name_or_path) else user_scenario(name_or_path)
    if _looks_like_path(name_or_path) or local is not None:
        path = local if local is not None else Path(name_or_path)
        module = _load_file(path)
        where = str(path)
    else:
        module_name = f"{SCENARIO_PACKAGE}.{name_or_path}"
        if importlib.util.find_spec(module_name) is None:
            known = ", ".join(n for n, _ in scenario_names())
            raise ScenarioError(f"there is no scenario named {name_or_path!r}",
                                f"use one of: {known} (see `hdppo scenarios`), add ./{USER_FOLDER}/"
                                f"{name_or_path}.py, or pass a file path")
        module = _exec(lambda: importlib.import_module(module_name), name_or_path)
        where = f"scenario {name_or_path!r}"
    scenario = getattr(module, "SCENARIO", None)
    if not isinstance(scenario, Scenario):
        raise ScenarioError("the module defines no SCENARIO = hdppo.Scenario(...)",
                            "add `SCENARIO = Scenario(name=..., env=..., graph=..., layers=...)` at module level "
                            "(a helper module in a scenarios/ folder: name it _NAME.py so it is not listed)",
                            where=where)
    if not (isinstance(scenario.config, type) and dataclasses.is_dataclass(scenario.config)):
        raise ScenarioError("Scenario.config is not a dataclass", "pass a @dataclass class extending ScenarioConfig",
                            where=where)
    scenario.source = str(getattr(module, "__file__", name_or_path))
    return scenario


def _looks_like_path(name: str) -> bool:
    return name.endswith(".py") or "/" in name or "\\" in name


def _load_file(path: Path) -> Any:
    """Import a scenario file. Its folder is importable while it runs (it may import files next to
    it), and for a file inside a project's scenarios/ folder the project folder too (`from
    scenarios.x import`), also when a worker loads it by its recorded path from another folder."""
    if not path.is_file():
        raise ScenarioError(f"scenario file {path} does not exist",
                            "pass the path of a Python file, or a name from `hdppo scenarios`")
    resolved = path.resolve()
    module_name = f"hdppo_user_scenario_{abs(hash(str(resolved)))}"
    package = [str(resolved.parent)] if resolved.name == "__init__.py" else None   # a scenario folder
    spec = importlib.util.spec_from_file_location(module_name, resolved, submodule_search_locations=package)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[module_name] = module
    inside = resolved.parent.parent if resolved.name == "__init__.py" else resolved.parent
    folders = [str(resolved.parent)] + ([str(inside.parent)] if inside.name == USER_FOLDER else [])
    for folder in reversed(folders):
        sys.path.insert(0, folder)
    try:
        _exec(lambda: spec.loader.exec_module(module), str(path))  # type: ignore[union-attr]
    except ScenarioError:
        sys.modules.pop(module_name, None)
        raise
    finally:
        for folder in folders:
            if folder in sys.path:
                sys.path.remove(folder)
    return module


def _exec(fn: Callable[[], Any], where: str) -> Any:
    try:
        result = fn()
        return result
    except ScenarioError:
        raise
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        user = [f for f in tb if "importlib" not in f.filename]
        loc = f" (line {user[-1].lineno} of {user[-1].filename})" if user else ""
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SyntaxError):
            loc = f" (line {exc.lineno} of {exc.filename})"
            detail = f"SyntaxError: {exc.msg}"
        raise ScenarioError(f"the scenario failed to import: {detail}{loc}",
                            "fix that line; run with --debug for the full traceback", where=where) from exc
