"""battle: MAgent2 battle_v4, red (trained: commander / squads of 9 by position / units) vs blue (scripted).

Units see MAgent2's 13x13x5 view plus a 10-float feature vector (see scenarios/battle/sim.py).
Goals are points: `high` sends each squad to one of regions x regions map points or "engage"
(the enemy nearest to the squad); `mid` sends each unit the same way. A goal is grounded as
[(point - position) / (map_size - 1) (2), engage flag (1)]. Upper layers observe small pooled
features (`observe`), not the units' views. Deaths: MAgent2 removes dead agents; their nodes turn
inactive. Episode metrics: win, draw, survivors, kills (BattleBatch.episode_info).

    hdppo check battle
    hdppo check battle layers=1
    hdppo check battle map_size=45 max_cycles=500      # 81 v 81, 9 squads of 9
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import numpy as np

from hdppo import AgentGraph, Layer, LayerContext, Opponents, Scenario, ScenarioConfig
from hdppo.errors import ScenarioError
from hdppo.sims import PettingZooBatch

from .sim import (
    OBS_DIM,
    VIEW_DIM,
    BattleBatch,
    Controller,
    X,
    Y,
    fight,
    make_parallel_env,
    random_controller,
    scripted_controller,
)

if TYPE_CHECKING:
    from hdppo import BatchedEnv
    from hdppo.sims import Scene

F0 = VIEW_DIM                       # unit features start here; squad features are their pooled means
N_POOL = OBS_DIM - VIEW_DIM         # 10 pooled unit features
POOL_LOW = np.array([0, 0, -1, -1, -1, -1, 0, 0, 0, 0, 0], np.float32)      # + fraction alive
POOL_SPACE = gym.spaces.Box(POOL_LOW, np.ones(N_POOL + 1, np.float32), dtype=np.float32)
MOVE_CELLS = 2.0                    # the longest move of a battle_v4 unit (sim.MOVES)
GOAL_SPACE = gym.spaces.Box(np.array([-1, -1, 0], np.float32), np.ones(3, np.float32), dtype=np.float32)


@dataclass
class BattleConfig(ScenarioConfig):
    """map_size sets the team size (battle_v4's map): 20 -> 12, 24 -> 16, 25 -> 20, 30 -> 30, 45 -> 81."""

    map_size: int = 24
    max_cycles: int = 200
    layers: int = 3                 # 1 flat units, 2 commander / units, 3 commander / squads / units
    squad_size: int = 9
    regions: int = 3                # goal points: a regions x regions grid over the map, plus "engage"
    reach: float = 2.0              # a unit (squad centroid) reaches a point within this many cells
    opponent: Literal["scripted", "random"] = "scripted"
    opponent_eps: float = 0.5       # the scripted opponent's probability of a random action
    native: bool = True             # raw-engine batch (win metrics, array opponent); false: PettingZoo copies
    # battle_v4 reward args over its defaults (step -0.005, dead -0.1, attack -0.1, hit +0.2): attack 0 so
    # that swinging at nothing does not teach a fresh policy never to attack; dead -2 so that dying early
    # costs more than living (200 steps x -0.005 = -1)
    rewards: dict[str, float] = field(default_factory=lambda: {"attack_penalty": 0.0, "dead_penalty": -2.0})
    unit_shaping: str = "distance"  # the units' goal reward (x w_int.low): distance, minus the distance to the
                                    # goal every step; progress, paid for ground closed on it and for standing
                                    # on it, no cost for living away from it (see progress_intrinsic)


UNIT_SHAPINGS = ("distance", "progress")       # BattleConfig.unit_shaping


def check_config(cfg: BattleConfig) -> None:
    def bad(problem: str, fix: str) -> None:
        raise ScenarioError(problem, fix, where="scenario 'battle'")
    if cfg.map_size < 15:
        bad(f"map_size={cfg.map_size} is below the smallest useful battle_v4 map",
            "use map_size >= 15 (15 gives 3 v 3, 24 gives 16 v 16)")
    if cfg.layers not in (1, 2, 3):
        bad(f"layers={cfg.layers} is not a supported depth", "use layers=1, 2 or 3")
    if cfg.squad_size < 1 or cfg.max_cycles < 1 or cfg.regions < 1 or cfg.reach <= 0:
        bad("squad_size, max_cycles and regions must be >= 1 and reach > 0", "fix those values")
    if not 0.0 <= cfg.opponent_eps <= 1.0:
        bad(f"opponent_eps={cfg.opponent_eps} is not a probability", "use 0 <= opponent_eps <= 1")
    if cfg.unit_shaping not in UNIT_SHAPINGS:
        bad(f"unit_shaping={cfg.unit_shaping!r} is not a unit shaping",
            f"use one of {', '.join(UNIT_SHAPINGS)}, e.g. unit_shaping=progress")
    unknown = set(cfg.rewards) - {"step_reward", "dead_penalty", "attack_penalty", "attack_opponent_reward"}
    if unknown:
        bad(f"rewards names unknown battle_v4 reward {sorted(unknown)[0]!r}",
            "use step_reward, dead_penalty, attack_penalty or attack_opponent_reward")


def _controller(cfg: BattleConfig) -> Controller:
    if cfg.opponent == "random":
        return random_controller
    return scripted_controller(cfg.map_size, cfg.opponent_eps)


# ---- envs ----------------------------------------------------------------------------------
def make_env(cfg: BattleConfig, render_mode: str | None = None) -> Any:
    """battle_v4 with hdppo's unit observation; render_mode="rgb_array" uses MAgent2's own renderer
    (`hdppo render` draws the team's squads and goals over its own view instead)."""
    check_config(cfg)
    return make_parallel_env(cfg.map_size, cfg.max_cycles, dict(cfg.rewards), render_mode=render_mode)


def make_batched(cfg: BattleConfig, n_envs: int, seed: int | None) -> BatchedEnv:
    check_config(cfg)
    if cfg.native:
        return BattleBatch(cfg.map_size, cfg.max_cycles, dict(cfg.rewards), n_envs, seed, _controller(cfg))
    probe = make_env(cfg)
    red = [a for a in probe.possible_agents if a.startswith("red")]
    return PettingZooBatch(lambda: make_env(cfg), red, n_envs, lambda i, env: blue_controller(cfg, env, seed, i))


def blue_controller(cfg: BattleConfig, env: Any, seed: int | None = None,
                    index: int = 0) -> Callable[[dict], dict]:
    """The PettingZoo path's opponent: the array controller over one copy's blue observations."""
    ctrl = _controller(cfg)
    rng = np.random.default_rng(None if seed is None else [seed + index, 104729])

    def act(observations: dict) -> dict:
        names = list(observations)
        if not names:
            return {}
        a = ctrl(np.stack([observations[n] for n in names]).astype(np.float32), rng)
        return {n: int(x) for n, x in zip(names, a)}
    return act


_counter = itertools.count()
OPPONENTS = Opponents(agents=lambda agents: [a for a in agents if a.startswith("blue")],
                      controller=lambda cfg, env: blue_controller(cfg, env, None, next(_counter)))


# ---- graph ---------------------------------------------------------------------------------
def make_graph(cfg: BattleConfig, agents: Sequence[str]) -> AgentGraph:
    units = [a for a in agents if a.startswith("red")]
    return AgentGraph.team(units, cfg.layers, cfg.squad_size, spatial=True)


def positions(env: Any) -> np.ndarray:
    """[E, U, 2] unit positions from the units' observations (normalised x, y)."""
    return env.obs[..., [X, Y]]


# ---- rendering (MAgent2's env also renders itself; this draws the team's squads and goals) ----------
def _team_xy(env: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions [n, 2] and alive flags of team k (0 red, 1 blue) in possible_agents order."""
    g, h = env.env, env.handles[k]
    names = [a for a in env.possible_agents if a.startswith("red" if k == 0 else "blue")]
    first = env.possible_agents.index(names[0])
    xy = np.full((len(names), 2), np.nan)
    ids = np.asarray(g.get_agent_id(h), np.int64) - first
    if len(ids):
        xy[ids] = g.get_pos(h)
    live = set(env.agents)
    return xy, np.array([n in live for n in names], bool)


def scene(env: Any) -> Scene:
    """Red units (the team), blue units (the opponent) of the battle_v4 env."""
    from hdppo.sims import Scene
    red, red_alive = _team_xy(env, 0)
    blue, blue_alive = _team_xy(env, 1)
    n = float(env.map_size)
    return Scene((-0.5, n - 0.5, -0.5, n - 0.5), np.nan_to_num(red, nan=-10.0), red_alive & np.isfinite(red).all(1),
                 np.nan_to_num(blue, nan=-10.0), blue_alive & np.isfinite(blue).all(1))


def goal_xy(env: Any, cfg: BattleConfig, layer: str, goals: np.ndarray) -> np.ndarray:
    """Goal g < regions^2: the centre of region g; the last goal (engage): the living enemies' centroid."""
    R, s = cfg.regions, float(cfg.map_size - 1)
    centres = (np.arange(R) + 0.5) / R
    points = np.array([(x, y) for y in centres for x in centres], float) * s
    blue, blue_alive = _team_xy(env, 1)
    live = blue_alive & np.isfinite(blue).all(1)
    engage = blue[live].mean(axis=0) if live.any() else np.full(2, np.nan)
    g = np.asarray(goals, np.int64)
    return np.where((g < R * R)[:, None], points[np.minimum(g, R * R - 1)], engage)


# ---- layers --------------------------------------------------------------------------------
def _pool(ctx: LayerContext) -> np.ndarray:
    """[E, N, 11]: mean of the living children's pooled features (unit FEAT, or squads' means) + fraction alive."""
    cf = ctx.child_features
    cf = cf[..., :N_POOL] if cf.shape[-1] == N_POOL + 1 else cf[..., F0:F0 + N_POOL]   # squads' means, or units' FEAT
    w = ctx.child_alive.astype(np.float32)
    n = w.sum(axis=2)
    mean = (cf * w[..., None]).sum(axis=2) / np.maximum(n, 1)[..., None]
    frac = n / np.maximum(w.shape[2], 1)
    return np.concatenate([mean, frac[..., None]], axis=-1).astype(np.float32)


def make_layers(cfg: BattleConfig) -> list[Layer]:
    check_config(cfg)
    if cfg.layers == 1:
        return [Layer("low", interval=1)]
    R, s = cfg.regions, float(cfg.map_size - 1)
    centres = (np.arange(R) + 0.5) / R
    points = np.array([(x, y) for y in centres for x in centres], np.float32)        # [R*R, 2] normalised
    n_goals = R * R + 1                                                              # last goal: engage
    reach = cfg.reach / s

    def ground(feats: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """feats [E, N, >=6]: x, y, enemy centroid vec, nearest enemy vec -> [E, N, 3]."""
        g = np.clip(goals.astype(np.int64), 0, n_goals - 1)
        engage = g == n_goals - 1
        pt = points[np.minimum(g, R * R - 1)]
        vec = np.where(engage[..., None], feats[..., 4:6], pt - feats[..., 0:2])
        return np.concatenate([vec, engage[..., None]], axis=-1).astype(np.float32)

    def unit_ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None                 # every hook but `observe` sees the features
        return ground(ctx.features[..., F0:F0 + 6], goals)

    def squad_ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None
        return ground(ctx.features[..., 0:6], goals)

    def unit_success(ctx: LayerContext) -> np.ndarray:
        d = np.linalg.norm(ctx.goal_features[..., :2], axis=-1)
        return np.where(ctx.goal_features[..., 2] > 0.5, d <= 1.5 / s, d <= reach)

    def squad_success(ctx: LayerContext) -> np.ndarray:
        return np.linalg.norm(ctx.goal_features[..., :2], axis=-1) <= 2 * reach

    def distance_intrinsic(ctx: LayerContext) -> np.ndarray:
        """`unit_shaping=distance`: 0 at the goal, else minus the normalised distance to it (in [-1, 0])
        every step. A dead unit's stream ends, so for a unit away from its goal dying ends a cost."""
        d = np.linalg.norm(ctx.goal_features[..., :2], axis=-1) / np.sqrt(2)
        return np.where(unit_success(ctx), 0.0, -d)

    def progress_intrinsic(ctx: LayerContext) -> np.ndarray:
        """`unit_shaping=progress`: 0.1 per longest move (2 cells) closed on the goal this step, beyond
        its reach (negative when the unit backs off; clipped to one move), and 0.05 per step on the goal
        (`unit_success`). Living away from the goal costs nothing, so dying never pays. An engage goal is
        the nearest enemy of each step: when it dies the next one's distance counts (at most one move lost)."""
        gf, pg = ctx.goal_features, ctx.prev_goal_features
        r = 0.05 * unit_success(ctx)
        if pg is None:
            return r
        reach_cells = np.where(gf[..., 2] > 0.5, 1.5, cfg.reach)
        beyond_now = np.maximum(np.linalg.norm(gf[..., :2], axis=-1) * s - reach_cells, 0.0)
        beyond_was = np.maximum(np.linalg.norm(pg[..., :2], axis=-1) * s - reach_cells, 0.0)
        return r + 0.1 * np.clip((beyond_was - beyond_now) / MOVE_CELLS, -1.0, 1.0)

    def scripted_low(decision: Any) -> np.ndarray:
        """Attack an adjacent enemy, else move toward the grounded goal (stop next to an engaged enemy)."""
        obs = np.asarray(decision.obs)
        E, S, D = obs.shape
        flat = obs.reshape(E * S, D)
        out = fight(flat[:, :VIEW_DIM], flat[:, -3:-1] * s, flat[:, -1] > 0.5)
        return out.reshape(E, S).astype(np.int64)

    goal: gym.spaces.Discrete = gym.spaces.Discrete(n_goals)
    intrinsic = progress_intrinsic if cfg.unit_shaping == "progress" else distance_intrinsic
    low = Layer("low", interval=1, intrinsic=intrinsic, w_int=0.1, scripted=scripted_low)

    def over_units(name: str, interval: int) -> Layer:
        """The layer above the units: a point (or engage) per unit."""
        return Layer(name, interval=interval, goal_space=goal, goal_features=unit_ground,
                     goal_features_space=GOAL_SPACE, goal_success=unit_success, observe=_pool, observe_space=POOL_SPACE)
    if cfg.layers == 2:
        return [over_units("high", 16), low]
    high = Layer("high", interval=16, goal_space=goal, goal_features=squad_ground, goal_features_space=GOAL_SPACE,
                 goal_success=squad_success, observe=_pool, observe_space=POOL_SPACE)
    return [high, over_units("mid", 4), low]


SCENARIO = Scenario(
    name="battle",
    description="MAgent2 battle: red commander / squads of 9 by position / units vs a scripted blue team",
    env=make_env, graph=make_graph, layers=make_layers, config=BattleConfig, batched_env=make_batched,
    opponents=OPPONENTS, positions=positions, scene=scene, goal_xy=goal_xy)
