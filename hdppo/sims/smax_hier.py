"""SMAX's target hierarchy (`hier=true` on the SMAX scenarios): the commander assigns each squad an
enemy, each squad assigns each of its units an enemy (its own target passed through, or another).

- Graph: commander -> squads of `squad_size` (the last one smaller when it does not divide the
  allies) -> units, in the allies' order.
- Goals: `high` and `mid` both choose `Discrete(n_enemies)` per child (goal k: enemy k, whose
  attack action is 5 + k); the commander also sees SMAX's world state (`use_state`).
- Grounding (`GOAL_F = 5 + n_enemies` floats), read from SMAX's world state of the current step
  (`env.state()`, not the units' observations, where an unseen and a dead enemy are both zeros):
  the vector from the child (a unit: its position; a squad: its living units' centroid) to the
  enemy / map size (2), its length, the enemy's health fraction, alive (1 / 0), one-hot of k. A dead
  enemy grounds as a zero vector with health 0 and alive 0 (the one-hot stays); a dead child as a
  zero vector.
- Goal masks (commander and squads): a node chooses among the enemies alive at its decision (any,
  once none is left), from the world state.
- `hold=true`: a goal stands until its enemy dies (per child slot, `held_targets`): a child holding
  a living enemy may be given only that one at its parent's decisions, so a layer decides anew for
  a child only when its target died (or at the episode's start). Without it the parents re-decide
  every `interval` steps.
- goal_success (units and squads): the assigned enemy died at this step (alive before it, dead
  after), so a goal naming an enemy already dead never succeeds.
- Units' intrinsic reward: the health fraction their enemy lost this step (by anyone's fire; a kill
  counts what it had left), weighted `w_int.low` (default `LOW_W_INT`, not tuned).
- The flat team's goal-free shaping (`layers=1`, weighted by `w_int.low`, 0 by default so the flat
  team learns from the env reward alone): the same reward with the goal replaced by the unit's
  nearest living enemy at the step's start (0 for a unit dead then, or with no enemy left);
  `w_int.low=0.1` gives it the hierarchy's weight. The control a hierarchy's claim must beat.
- Scripted layers (for layer views and bottom-up schedules): squads pass their own target to every
  unit; units attack their enemy when the mask allows it, else walk to it, else attack any enemy in
  range, else stop.
- The commander's goals while it is not trained (`--skills`, `--layer low`): `goal_sampler=uniform`
  (the default) draws each squad its own living enemy; `team` draws one living enemy per decision
  for every squad of a copy (`team_target`), so the units learn to fire together at one target.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.sims.smax_world import smax_env, world_units

LOW_W_INT = 0.1
N_MOVES = 5                                   # SMAX: 0 north, 1 east, 2 south, 3 west, 4 stop, 5 + k attack k
DIRS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]], np.float32)


class Sizes:
    """A hierarchical SMAX config's numbers: allies, enemies, squads, map size, unit obs width."""

    def __init__(self, cfg: Any) -> None:
        from hdppo.sims.jaxmarl import cached_env, env_params
        env = cached_env(smax_env, env_params(cfg))
        self.A, self.K = int(env.num_allies), int(env.num_enemies)
        self.Q = max(1, min(int(cfg.squad_size), self.A))
        self.members = np.arange(self.A) // self.Q == np.arange(-(-self.A // self.Q))[:, None]   # [G, A]
        self.scale = float(max(env.map_width, env.map_height))
        self.obs_width = max(int(np.prod(env.observation_spaces[a].shape)) for a in env.agents)
        self.F = 5 + self.K


def goal_space(sz: Sizes) -> gym.spaces.Box:
    """Bounds of the grounded goal: vector (2) in [-1, 1], length in [0, sqrt 2], health, alive, one-hot."""
    low = np.zeros(sz.F, np.float32)
    low[:2] = -1.0
    high = np.ones(sz.F, np.float32)
    high[2] = np.sqrt(2.0)
    return gym.spaces.Box(low, high, dtype=np.float32)


def ground(world: np.ndarray, origin: np.ndarray, here: np.ndarray, goals: np.ndarray, sz: Sizes) -> np.ndarray:
    """Goals [E, N] (enemy k) grounded from world states [E, S] for children at `origin` [E, N, 2]
    (`here` [E, N]: the child is alive) -> [E, N, GOAL_F] (see the module docstring)."""
    pos, hp = world_units(np.asarray(world, np.float32), sz.A + sz.K)
    k = np.clip(np.asarray(goals, np.int64), 0, sz.K - 1)
    e_pos = np.take_along_axis(pos[:, sz.A:], k[..., None], axis=1)              # [E, N, 2]
    e_hp = np.take_along_axis(hp[:, sz.A:], k, axis=1)                           # [E, N]
    on = (e_hp > 0) & here
    vec = np.where(on[..., None], (e_pos - origin) / sz.scale, 0.0)
    out = np.zeros(k.shape + (sz.F,), np.float32)
    out[..., :2] = vec
    out[..., 2] = np.sqrt((vec ** 2).sum(-1))
    out[..., 3] = e_hp
    out[..., 4] = e_hp > 0
    np.put_along_axis(out, 5 + k[..., None], 1.0, axis=-1)
    return out


def unit_origin(world: np.ndarray, sz: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """The allies' positions [E, A, 2] and alive [E, A]."""
    pos, hp = world_units(world, sz.A + sz.K)
    return pos[:, :sz.A], hp[:, :sz.A] > 0


def squad_origin(world: np.ndarray, sz: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """Each squad's centroid of its living units [E, G, 2] and whether one lives [E, G]."""
    pos, live = unit_origin(world, sz)
    w = sz.members[None] & live[:, None, :]                                      # [E, G, A]
    n = w.sum(-1)
    centre = (w[..., None] * pos[:, None]).sum(2) / np.maximum(n, 1)[..., None]
    return centre, n > 0


Origin = Callable[[np.ndarray, Sizes], tuple[np.ndarray, np.ndarray]]


def goal_features(sz: Sizes, origin: Origin) -> Callable[[np.ndarray, Any], np.ndarray]:
    """The grounding hook for children placed by `origin` (units or squads), from `ctx.env.state()`."""
    def hook(goals: np.ndarray, ctx: Any) -> np.ndarray:
        world = np.asarray(ctx.env.state(), np.float32)
        place, here = origin(world, sz)
        return ground(world, place, here, goals, sz)
    return hook


def living_enemies(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """The goal mask of the commander and the squads: the enemies alive now, bool [E, N, K]."""
    def hook(ctx: Any) -> np.ndarray:
        hp = world_units(np.asarray(ctx.env.state(), np.float32), sz.A + sz.K)[1][:, sz.A:]
        return np.repeat((hp > 0)[:, None], ctx.alive.shape[1], axis=1)
    return hook


def held_targets(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """The goal mask with `hold=true`, per child slot, bool [E, N, C, K]: a child that holds an enemy
    still alive keeps it (a target stands until it dies), the others choose among the living."""
    def hook(ctx: Any) -> np.ndarray:
        hp = world_units(np.asarray(ctx.env.state(), np.float32), sz.A + sz.K)[1][:, sz.A:]
        living = hp > 0                                                          # [E, K]
        k = np.clip(np.asarray(ctx.child_goals, np.int64), 0, sz.K - 1)          # [E, N, C]
        keep = np.asarray(ctx.child_holds, bool) & living[np.arange(len(k))[:, None, None], k]
        held = np.arange(sz.K) == k[..., None]
        return np.where(keep[..., None], held, living[:, None, None, :])
    return hook


def _target_hp(world: np.ndarray, goals: np.ndarray, sz: Sizes) -> np.ndarray:
    hp = world_units(np.asarray(world, np.float32), sz.A + sz.K)[1][:, sz.A:]
    return np.take_along_axis(hp, np.clip(np.asarray(goals, np.int64), 0, sz.K - 1), axis=1)


def worlds(env: Any) -> tuple[np.ndarray, np.ndarray]:
    """The world states [E, S] before and after this env step."""
    before = env.state_before_step() if hasattr(env, "state_before_step") else env.state()
    return before, env.state()


def before_and_after(ctx: Any, sz: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """The assigned enemies' health fractions [E, N] before and after this env step."""
    before, after = worlds(ctx.env)
    return _target_hp(before, ctx.goals, sz), _target_hp(after, ctx.goals, sz)


def goal_success(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """The assigned enemy died at this step."""
    def hook(ctx: Any) -> np.ndarray:
        before, after = before_and_after(ctx, sz)
        return (before > 0) & (after <= 0)
    return hook


def low_intrinsic(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """The health fraction the unit's assigned enemy lost this step, in [0, 1]."""
    def hook(ctx: Any) -> np.ndarray:
        before, after = before_and_after(ctx, sz)
        return np.clip(before - after, 0.0, 1.0)
    return hook


def nearest_enemy(world: np.ndarray, sz: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """Each ally's nearest living enemy [E, A] in world states [E, S], and whether it has one (the
    ally alive and an enemy left) [E, A]."""
    pos, hp = world_units(np.asarray(world, np.float32), sz.A + sz.K)
    d = np.linalg.norm(pos[:, :sz.A, None] - pos[:, None, sz.A:], axis=-1)      # [E, A, K]
    d = np.where(hp[:, None, sz.A:] > 0, d, np.inf)
    return d.argmin(-1), (hp[:, :sz.A] > 0) & np.isfinite(d).any(-1)


def flat_intrinsic(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """The flat team's goal-free shaping: the health fraction the unit's nearest living enemy (at
    the step's start) lost this step, in [0, 1]; 0 for a unit dead then or with no enemy left."""
    def hook(ctx: Any) -> np.ndarray:
        before, after = worlds(ctx.env)
        k, has = nearest_enemy(before, sz)
        lost = _target_hp(before, k, sz) - _target_hp(after, k, sz)
        return np.where(has, np.clip(lost, 0.0, 1.0), 0.0)
    return hook


def scripted_low(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """Attack the assigned enemy when legal, else walk to it, else attack any enemy in range, else stop."""
    def act(decision: Any) -> np.ndarray:
        obs = np.asarray(decision.obs)
        g = obs[..., -sz.F:]
        k = g[..., 5:].argmax(-1)
        mask = (np.ones(obs.shape[:2] + (N_MOVES + sz.K,), bool) if decision.action_mask is None
                else np.asarray(decision.action_mask, bool))
        attacks = mask[..., N_MOVES:N_MOVES + sz.K]
        can_hit = np.take_along_axis(attacks, k[..., None], -1)[..., 0]
        walk = g[..., 4] > 0
        move = (g[..., :2] @ DIRS.T).argmax(-1)
        other = np.where(attacks.any(-1), N_MOVES + attacks.argmax(-1), N_MOVES - 1)
        return np.where(can_hit, N_MOVES + k, np.where(walk, move, other)).astype(np.int64)
    return act


def scripted_mid(sz: Sizes) -> Callable[[Any], np.ndarray]:
    """Every unit gets its squad's target: the one-hot of the squad's grounded goal, which ends the
    squad's part of a per_child slot observation [squad, its goal, unit features, one-hot of the unit]."""
    C = sz.Q
    end = C + sz.obs_width

    def act(decision: Any) -> np.ndarray:
        obs = np.asarray(decision.obs)
        return obs[..., -end - sz.K:-end].argmax(-1).astype(np.int64)
    return act


GOAL_SAMPLERS = ("uniform", "team")            # the `goal_sampler` key (with hier=true)


def team_target(sz: Sizes) -> Callable[..., np.ndarray]:
    """`goal_sampler=team`: at each of the untrained commander's decisions, one enemy drawn uniformly
    among those its goal mask allows (the living; any, once none is left) for every squad of a copy;
    a squad whose own mask forbids it (`hold=true`: it holds another living target) draws its own."""
    def act(decision: Any, rng: np.random.Generator) -> np.ndarray:
        E, S = decision.mask.shape
        legal = (np.ones((E, S, sz.K), bool) if decision.action_mask is None
                 else np.asarray(decision.action_mask, bool).reshape(E, S, sz.K))
        living = legal.any(1)                                              # [E, K]
        shared = np.where(living.any(-1, keepdims=True), living, True)     # no enemy allowed: any
        team = np.repeat((rng.random((E, sz.K)) * shared).argmax(-1)[:, None], S, axis=1)   # [E, S]
        own = (rng.random((E, S, sz.K)) * np.where(legal.any(-1, keepdims=True), legal, True)).argmax(-1)
        allowed = np.take_along_axis(legal, team[..., None], -1)[..., 0] | ~legal.any(-1)
        return np.where(allowed, team, own).astype(np.int64)
    return act


def check_sampler(cfg: Any) -> None:
    """Refuse a `goal_sampler` the hierarchy does not know, or one set without `hier=true`."""
    from hdppo.errors import ScenarioError
    value, where = getattr(cfg, "goal_sampler", "uniform"), f"SMAX {getattr(cfg, 'map_name', '')}".strip()
    if value not in GOAL_SAMPLERS:
        raise ScenarioError(f"goal_sampler={value!r} is not a goal sampler",
                            f"use one of {', '.join(GOAL_SAMPLERS)}, e.g. goal_sampler=team", where=where)
    if value != "uniform" and not getattr(cfg, "hier", False):
        raise ScenarioError(f"goal_sampler={value} samples the target hierarchy's goals, and hier is off",
                            "add hier=true, or drop goal_sampler", where=where)


def layers(cfg: Any) -> list:
    """The generic team (hdppo.sims.vmas.team_layers; flat, its units get the goal-free shaping
    under `w_int.low`, 0 by default), or with `hier` the target hierarchy."""
    from hdppo.sims.vmas import team_layers
    from hdppo.team.scenario import Layer
    check_sampler(cfg)
    if not getattr(cfg, "hier", False):
        if cfg.layers == 1:
            return [Layer("low", intrinsic=flat_intrinsic(Sizes(cfg)), w_int=0.0)]
        return team_layers(cfg)
    sz = Sizes(cfg)
    enemy: gym.spaces.Discrete = gym.spaces.Discrete(sz.K)
    box, success = goal_space(sz), goal_success(sz)
    legal = held_targets(sz) if getattr(cfg, "hold", False) else living_enemies(sz)
    sampler = team_target(sz) if cfg.goal_sampler == "team" else None          # else uniform
    return [Layer("high", interval=8, goal_space=enemy, use_state=True, goal_features=goal_features(sz, squad_origin),
                  goal_features_space=box, goal_success=success, goal_mask=legal, scripted=sampler),
            Layer("mid", interval=4, goal_space=enemy, goal_features=goal_features(sz, unit_origin),
                  goal_features_space=box, goal_success=success, scripted=scripted_mid(sz), goal_mask=legal),
            Layer("low", intrinsic=low_intrinsic(sz), w_int=LOW_W_INT, scripted=scripted_low(sz))]


def graph(cfg: Any, agents: Sequence[str]) -> Any:
    """The generic team graph, or with `hier` commander -> squads of squad_size -> units."""
    from hdppo.sims.vmas import team_graph
    from hdppo.team.graph import AgentGraph
    if not getattr(cfg, "hier", False):
        return team_graph(cfg, agents)
    return AgentGraph.team(list(agents), 3, int(cfg.squad_size))


def goal_xy(env: Any, cfg: Any, layer: str, goals: np.ndarray) -> np.ndarray:
    """Where the enemies a layer's nodes hold as goals stand (NaN: dead), for `hdppo render`."""
    if not getattr(cfg, "hier", False):
        return np.full((len(goals), 2), np.nan)
    sz = Sizes(cfg)
    pos, hp = world_units(np.asarray(env.batch.state(), np.float32)[:1], sz.A + sz.K)
    k = np.clip(np.asarray(goals, np.int64), 0, sz.K - 1)
    return np.where((hp[0, sz.A:][k] > 0)[:, None], pos[0, sz.A:][k], np.nan)
