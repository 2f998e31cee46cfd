"""skirmish: a StarCraft-micro-like battle of two teams of melee and ranged units over 3 control points.

The learning team (n_squads x squad_size units) fights a mirrored team driven by a scripted AI
inside the batched env (`scenarios/skirmish/sim.py`). Win by eliminating the opponent or by
holding more points at the time limit. Layers: commander (which point or enemy squad each squad
engages) / squads (which point, enemy squad or enemy unit each unit goes for) / units.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from hdppo import AgentGraph, Layer, LayerContext, Scenario
from hdppo.sims import BatchParallelEnv
from hdppo.team.scenario import Choice

from .sim import DIRS, N_MOVES, SkirmishBatch, SkirmishConfig, check_config

if TYPE_CHECKING:
    from hdppo.sims import Scene

__all__ = ["SCENARIO", "SkirmishBatch", "SkirmishConfig", "SkirmishParallelEnv", "scripted_low"]

# grounded goal: [vector to the goal's position / size (2), its length (1), is an enemy (1),
#                 status: point owner (-1..1) or the enemy's alive fraction / hp fraction (0..1)]
GOAL_F = 5
GOAL_BOX = gym.spaces.Box(np.array([-1, -1, 0, 0, -1], np.float32), np.array([1, 1, 1.5, 1, 1], np.float32),
                          dtype=np.float32)


class SkirmishParallelEnv(BatchParallelEnv):
    """One skirmish copy behind PettingZoo's parallel dict API (SkirmishBatch with E=1).

    Observations are flat Boxes; the legal actions are in infos[agent]["action_mask"]; an illegal
    action is a stop.
    """

    metadata = {"name": "skirmish_v0", "render_modes": ["rgb_array"]}
    batch: SkirmishBatch

    def __init__(self, cfg: SkirmishConfig | None = None, render_mode: str | None = None) -> None:
        self.cfg = cfg if cfg is not None else SkirmishConfig()
        super().__init__(SkirmishBatch(self.cfg, 1, None), mask_in_infos=True, render_mode=render_mode, scene=scene)


# ---- rendering ------------------------------------------------------------------------------------
OWNER_COLOURS = {1: "#1f77b4", -1: "#d62728", 0: "#ffffff"}


def scene(env: SkirmishParallelEnv) -> Scene:
    """Units, enemies and the control points (coloured by owner) of the env's copy."""
    from hdppo.sims import Scene
    b, sz = env.batch, float(env.cfg.size)
    return Scene((0.0, sz, 0.0, sz), b.pos[0].copy(), b.hp[0] > 0, b.opos[0].copy(), b.ohp[0] > 0,
                 b.points.copy(), [OWNER_COLOURS[int(o)] for o in b.owner[0]])


def goal_xy(env: SkirmishParallelEnv, cfg: Any, layer: str, goals: np.ndarray) -> np.ndarray:
    """Goal g: point g, enemy squad g - P (centroid of its living units), or enemy unit g - P - G."""
    b, cfg = env.batch, env.cfg
    P, G, Q = cfg.n_points, cfg.n_squads, cfg.squad_size
    live = b.ohp[0] > 0
    out = np.full((len(goals), 2), np.nan)
    for k, g in enumerate(np.asarray(goals, np.int64)):
        if g < P:
            out[k] = b.points[g]
        elif g < P + G:
            members = np.arange((g - P) * Q, (g - P + 1) * Q)
            members = members[live[members]]
            if len(members):
                out[k] = b.opos[0, members].mean(axis=0)
        elif live[g - P - G]:
            out[k] = b.opos[0, g - P - G]
    return out


# ---- goals: grounding, success, intrinsic reward, scripted units ----------------------------------
class _Layout:
    """Offsets of the unit observation (see SkirmishBatch) for a config."""

    def __init__(self, cfg: SkirmishConfig) -> None:
        self.U = self.K = cfg.n_squads * cfg.squad_size
        self.P, self.G, self.Q = cfg.n_points, cfg.n_squads, cfg.squad_size
        self.enemy = 5 + 3 * self.U
        self.point = self.enemy + 4 * self.K
        self.dim = self.point + 3 * self.P + 1
        self.reach_point = cfg.point_radius / cfg.size
        self.reach = np.array([cfg.melee_range, cfg.ranged_range]) / cfg.size
        self.stride = cfg.speed / cfg.size          # one move, in the observation's units

    def enemies(self, f: np.ndarray) -> np.ndarray:
        """The enemy block of unit features [E, N, D] as [E, N, K, (rel x, rel y, hp frac, in range)]."""
        return f[..., self.enemy:self.point].reshape(*f.shape[:2], self.K, 4)

    def own_reach(self, f: np.ndarray) -> np.ndarray:
        """Each unit's attack range [E, N] (melee or ranged, from its features), in the observation's units."""
        return self.reach[(f[..., 3] > 0.5).astype(np.int64)]


def _ground(feats: np.ndarray, goals: np.ndarray, lay: _Layout) -> np.ndarray:
    """Goal index -> [vector, distance, is_enemy, status] from unit-observation-shaped features.

    Goal g: g < P point g; g < P + G enemy squad g - P (centroid of its living units);
    else enemy unit g - P - G. A destroyed enemy goal grounds as a zero vector with status 0.
    """
    E, N = goals.shape
    P, G, K, Q = lay.P, lay.G, lay.K, lay.Q
    en = feats[..., lay.enemy:lay.point].reshape(E, N, K, 4)
    alive = (en[..., 2] > 0).astype(np.float32)                                     # [E, N, K]
    pts = feats[..., lay.point:lay.point + 3 * P].reshape(E, N, P, 3)
    n_grp = alive.reshape(E, N, G, Q).sum(-1)                                       # [E, N, G]
    grp_vec = (en[..., :2] * alive[..., None]).reshape(E, N, G, Q, 2).sum(3) / np.maximum(n_grp, 1)[..., None]
    vec = np.concatenate([pts[..., :2], grp_vec, en[..., :2]], axis=2)              # [E, N, P+G+K, 2]
    status = np.concatenate([pts[..., 2], n_grp / Q, en[..., 2]], axis=2)           # [E, N, P+G+K]
    g = np.clip(goals.astype(np.int64), 0, P + G + K - 1)
    v = np.take_along_axis(vec, g[:, :, None, None], axis=2)[:, :, 0]
    out = np.empty((E, N, GOAL_F), np.float32)
    out[..., :2] = v
    out[..., 2] = np.sqrt((v ** 2).sum(-1))
    out[..., 3] = g >= P
    out[..., 4] = np.take_along_axis(status, g[:, :, None], axis=2)[..., 0]
    return out


GoalFeatures = Callable[[np.ndarray, LayerContext], np.ndarray]
Hook = Callable[[LayerContext], np.ndarray]


def unit_goal_features(lay: _Layout) -> GoalFeatures:
    """Grounding for units: ctx.features are their observations."""
    def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None                 # every hook but `observe` sees the features
        return _ground(ctx.features, goals, lay)
    return ground


def squad_goal_features(lay: _Layout) -> GoalFeatures:
    """Grounding for squads: the mean part of their default features is the centroid's view."""
    def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None
        return _ground(ctx.features[..., :lay.dim], goals, lay)
    return ground


def unit_goal_success(lay: _Layout) -> Hook:
    """A unit's goal is reached when it stands on its goal point, or its goal enemy is destroyed."""
    def success(ctx: LayerContext) -> np.ndarray:
        gf = ctx.goal_features
        return np.where(gf[..., 3] > 0.5, gf[..., 4] <= 0, gf[..., 2] <= lay.reach_point)
    return success


def squad_goal_success(ctx: LayerContext) -> np.ndarray:
    """A squad's goal is reached when its goal point is held by us, or its goal enemy squad destroyed."""
    gf = ctx.goal_features
    return np.where(gf[..., 3] > 0.5, gf[..., 4] <= 0, gf[..., 4] > 0.5)


def low_intrinsic(lay: _Layout) -> Hook:
    """-(distance beyond reach) of the goal (point radius, or own attack range for an enemy), plus
    2 x the goal enemy's loss of hp / alive fraction this step. In about [-1.4, 2]."""
    def intrinsic(ctx: LayerContext) -> np.ndarray:
        gf, f = ctx.goal_features, ctx.features
        assert f is not None
        enemy = gf[..., 3] > 0.5
        reach = np.where(enemy, lay.reach[(f[..., 3] > 0.5).astype(np.int64)], lay.reach_point)
        r = -np.maximum(gf[..., 2] - reach, 0.0)
        r = np.where(enemy & (gf[..., 4] <= 0), 0.0, r)
        prev = ctx.prev_goal_features
        if prev is not None:
            r = r + 2.0 * enemy * np.clip(prev[..., 4] - gf[..., 4], 0.0, 1.0)
        return r
    return intrinsic


def progress_intrinsic(lay: _Layout) -> Hook:
    """`unit_shaping=progress`: 0.1 per move's length the unit closed on its goal this step (negative
    when it backs off; 0 once the goal enemy is destroyed), 0.05 per step on its goal point, 2 x the goal
    enemy's loss of hp / alive fraction, and 1 x the hp lost by every enemy that was in its range. A unit
    pays only for ground it loses, not for the steps it lives away from its goal, so dying does not end a
    cost (as it does under `distance`)."""
    def intrinsic(ctx: LayerContext) -> np.ndarray:
        gf, f, pg, prev = ctx.goal_features, ctx.features, ctx.prev_goal_features, ctx.prev_features
        assert f is not None
        enemy = gf[..., 3] > 0.5
        reach = np.where(enemy, lay.own_reach(f), lay.reach_point)
        beyond = np.maximum(gf[..., 2] - reach, 0.0)
        r = 0.05 * (~enemy & (beyond <= 0))
        if pg is None or prev is None:
            return r
        closed = _closed(lay, np.maximum(pg[..., 2] - reach, 0.0), beyond)
        standing = ~enemy | ((gf[..., 4] > 0) & (pg[..., 4] > 0))
        r = r + 0.1 * np.where(standing, closed, 0.0) + 2.0 * enemy * np.clip(pg[..., 4] - gf[..., 4], 0.0, 1.0)
        was = lay.enemies(prev)
        return r + (_hp_lost(was, lay.enemies(f)) * (was[..., 3] > 0)).sum(-1)
    return intrinsic


def _closed(lay: _Layout, beyond_was: np.ndarray, beyond_now: np.ndarray) -> np.ndarray:
    """Ground closed on a target this step, in moves of length `speed`, clipped to [-1, 1]."""
    return np.clip((beyond_was - beyond_now) / lay.stride, -1.0, 1.0)


def _hp_lost(was: np.ndarray, now: np.ndarray) -> np.ndarray:
    """Each enemy's loss of hp fraction this step [E, N, K] from two enemy blocks (`_Layout.enemies`)."""
    return np.clip(was[..., 2] - now[..., 2], 0.0, 1.0)


def _enemy_distances(en: np.ndarray) -> np.ndarray:
    """Distance to each living enemy [E, N, K] of an enemy block; inf for a dead one."""
    return np.where(en[..., 2] > 0, np.sqrt((en[..., :2] ** 2).sum(-1)), np.inf)


def _nearest(lay: _Layout, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nearest living enemy of each unit: its index [E, N], its distance (inf: none alive) and
    every enemy's hp fraction [E, N, K]."""
    en = lay.enemies(f)
    dist = _enemy_distances(en)
    k = dist.argmin(-1)
    return k, np.take_along_axis(dist, k[..., None], -1)[..., 0], en[..., 2]


def flat_intrinsic(lay: _Layout) -> Hook:
    """The units' goal shaping for a flat team, with the goal replaced by the nearest living enemy
    (which needs no goals): -(its distance beyond the unit's attack range), plus 2 x the loss of hp
    / alive of the enemy that was nearest before this step. Weight it with `w_int.low` (0 by default;
    the 3-layer team's units use 0.1), so a flat team can get the same dense shaping."""
    def intrinsic(ctx: LayerContext) -> np.ndarray:
        f = ctx.features
        assert f is not None
        _, d, _ = _nearest(lay, f)
        reach = lay.own_reach(f)
        r = np.where(np.isfinite(d), -np.maximum(d - reach, 0.0), 0.0)
        prev = ctx.prev_features
        if prev is not None:
            k, d_prev, hp_prev = _nearest(lay, prev)
            hp_now = lay.enemies(f)[..., 2]
            pick = k[..., None]
            loss = (np.take_along_axis(hp_prev, pick, -1) - np.take_along_axis(hp_now, pick, -1))[..., 0]
            r = r + 2.0 * np.where(np.isfinite(d_prev), np.clip(loss, 0.0, 1.0), 0.0)
        return r
    return intrinsic


def flat_progress_intrinsic(lay: _Layout) -> Hook:
    """`unit_shaping=progress` for a flat team: `progress_intrinsic` with the goal replaced by the enemy
    nearest the unit before this step (0.1 per move's length closed on it, 2 x its loss of hp) plus
    1 x the hp lost by every enemy that was in the unit's range."""
    def intrinsic(ctx: LayerContext) -> np.ndarray:
        f, prev = ctx.features, ctx.prev_features
        assert f is not None
        if prev is None:
            return np.zeros(f.shape[:2])
        was, now = lay.enemies(prev), lay.enemies(f)
        k, d_was, _ = _nearest(lay, prev)
        pick = lambda a: np.take_along_axis(a, k[..., None], -1)[..., 0]            # noqa: E731
        reach = lay.own_reach(f)
        standing = np.isfinite(d_was) & (pick(now[..., 2]) > 0)                    # it lives on: d_now finite
        beyond_was = np.maximum(np.where(standing, d_was, 0.0) - reach, 0.0)
        closed = _closed(lay, beyond_was, np.maximum(pick(_enemy_distances(now)) - reach, 0.0))
        loss = _hp_lost(was, now)
        return (0.1 * np.where(standing, closed, 0.0) + 2.0 * np.where(np.isfinite(d_was), pick(loss), 0.0)
                + (loss * (was[..., 3] > 0)).sum(-1))
    return intrinsic


def scripted_low(lay: _Layout) -> Callable[[Any], np.ndarray]:
    """Scripted unit: attack the legal target nearest its goal position; else hold if an enemy is in
    range (cooling down), or at the goal point / in range of the goal enemy; else move toward the
    goal (toward the nearest enemy once the goal enemy is destroyed). Reads obs = [env obs, goal]."""
    K = lay.K

    def act(decision: Any) -> np.ndarray:
        obs = np.asarray(decision.obs)
        g = obs[..., -GOAL_F:]
        v, dist, enemy, status = g[..., :2], g[..., 2], g[..., 3] > 0.5, g[..., 4]
        en = obs[..., lay.enemy:lay.point].reshape(*obs.shape[:2], K, 4)
        legal = (np.ones(en.shape[:3], bool) if decision.action_mask is None
                 else np.asarray(decision.action_mask)[..., N_MOVES:N_MOVES + K])
        cost = ((en[..., :2] - v[..., None, :]) ** 2).sum(-1)
        pick = np.where(legal, cost, np.inf).argmin(-1)
        can = legal.any(-1)
        alive = en[..., 2] > 0
        nearest = np.where(alive, (en[..., :2] ** 2).sum(-1), np.inf).argmin(-1)
        near_vec = np.take_along_axis(en[..., :2], nearest[..., None, None], axis=2)[..., 0, :]
        done = enemy & (status <= 0)
        to = np.where(done[..., None], near_vec, v)
        reach = np.where(enemy, lay.reach[(obs[..., 3] > 0.5).astype(np.int64)], 0.5 * lay.reach_point)
        hold = (en[..., 3] > 0).any(-1) | (~done & (dist <= reach)) | ((to ** 2).sum(-1) == 0)
        move = 1 + (to @ DIRS[1:].T).argmax(-1)
        return np.where(can, N_MOVES + pick, np.where(hold, 0, move)).astype(np.int64)
    return act


def team_goals(n_goals: int) -> Callable[..., np.ndarray]:
    """A goal sampler for the layer above the units (`goal_sampler=team`): at each of its decisions,
    one goal drawn uniformly from its n_goals for every unit of a copy, so the team meets each point
    and enemy together (on skirmish_long, scripted units each on its own random goal win no episode)."""
    def act(decision: Any, rng: np.random.Generator) -> np.ndarray:
        E, S = decision.mask.shape
        return np.repeat(rng.integers(0, n_goals, (E, 1)), S, axis=1).astype(np.int64)
    return act


def layers(cfg: SkirmishConfig) -> list[Layer]:
    """high (point or enemy squad per squad) / mid (point, enemy squad or enemy unit per unit) / low."""
    check_config(cfg)
    lay = _Layout(cfg)
    if cfg.layers == 1:
        shaping = flat_progress_intrinsic(lay) if cfg.unit_shaping == "progress" else flat_intrinsic(lay)
        return [Layer("low", interval=1, intrinsic=shaping, w_int=0.0)]
    shaping = progress_intrinsic(lay) if cfg.unit_shaping == "progress" else low_intrinsic(lay)
    low = Layer("low", interval=1, intrinsic=shaping, w_int=0.1, scripted=scripted_low(lay))
    unit_ground, unit_success = unit_goal_features(lay), unit_goal_success(lay)

    def to_units(name: str, interval: int, n_goals: int, choice: Choice = "per_child") -> Layer:
        """The layer above the units: a point, enemy squad (or, for mid, enemy unit) per unit."""
        sampler = team_goals(n_goals) if cfg.goal_sampler == "team" else None     # else uniform
        return Layer(name, interval=interval, goal_space=gym.spaces.Discrete(n_goals), choice=choice,
                     goal_features=unit_ground, goal_features_space=GOAL_BOX, goal_success=unit_success,
                     scripted=sampler)
    commander = cast(Choice, cfg.commander)                 # check_config: one of Choice's values
    if cfg.layers == 2:
        return [to_units("high", 8, lay.P + lay.G, commander), low]
    high = Layer("high", interval=16, goal_space=gym.spaces.Discrete(lay.P + lay.G), choice=commander,
                 goal_features=squad_goal_features(lay), goal_features_space=GOAL_BOX,
                 goal_success=squad_goal_success)
    mid = to_units("mid", 4, lay.P + lay.G + lay.K)
    return [high, mid, low]


def graph(cfg: SkirmishConfig, agents: Sequence[str]) -> AgentGraph:
    """Flat, commander over units, or commander / n_squads squads of squad_size / units."""
    return AgentGraph.team(list(agents), cfg.layers, cfg.squad_size)


SCENARIO = Scenario(
    name="skirmish",
    description="StarCraft-micro-like battle: 3 squads of melee+ranged units vs a scripted team, 3 control points.",
    env=lambda cfg: SkirmishParallelEnv(cfg),
    graph=graph,
    layers=layers,
    config=SkirmishConfig,
    batched_env=lambda cfg, n, seed: SkirmishBatch(cfg, n, seed),
    positions=lambda env: env.positions(),
    scene=scene,
    goal_xy=goal_xy,
)
