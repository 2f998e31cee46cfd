"""`python -m examples.studies.warehouse_zones --set width=16 --set height=14 --set n_stations=3`: what
the warehouse's zone goals cost, with no learning in the way.

Scripted robots (the scenario's `greedy_low`: take the grounded first move, step aside when a robot
blocks it) play `--episodes` episodes (one batch of copies, seed `--seed`) under three dispatchers:

- `random`: every robot a uniform random zone, redrawn every `interval` steps (the untrained upper
  layers of a skill run);
- `nearest`: every robot the zone of its nearest open order (by path), redrawn every `interval`
  steps, a random zone when no order is open (a sensible hand-made dispatcher);
- `no zones`: no dispatcher: a robot goes for its own nearest open order anywhere and delivers it
  (the observation's nearest-order and nearest-station blocks; what a flat team can learn).

The gap between `nearest` and `no zones` is what assigning robots to zones costs on that floor
whatever the dispatcher learns; docs/skills.md (the transfer study) reads it.

`--library RUN` plays a skill library (a `hdppo train warehouse --skills` run, through `hdppo.load`,
its `mid` layer replaced) for `--library-episodes` episodes under `random`, `nearest` and `zone 0`
(every robot ordered to zone 0), and counts the share of its picks made in the picking robot's
goal zone: robots that obey deliver less when all are sent to one zone; robots that ignore their
orders do not.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from hdppo.overrides import apply_overrides, parse_assignments
from hdppo.scenarios.warehouse import WarehouseConfig, greedy_low, make_batch
from hdppo.scenarios.warehouse.sim import FAR, OFF_CARRY, OFF_ORDERS, OFF_STATION, WarehouseBatch
from hdppo.team.interfaces import Decision

DISPATCHERS = ("random", "nearest", "no zones")


def nearest_zone(env: WarehouseBatch, rng: np.random.Generator) -> np.ndarray:
    """[E, U]: the zone of each robot's nearest open order, a random zone where none is open."""
    d, _, _ = env._order_dist()
    q = d.argmin(axis=2)
    fallback = rng.integers(0, 4, d.shape[:2])
    return np.where(d.min(axis=2) < FAR, env.slot_zone[q], fallback)


def own_task(obs: np.ndarray) -> np.ndarray:
    """[E, U, 6] goal-shaped features of a robot's own task: the nearest station when it carries,
    else its nearest open order (vector, distance, first move, has task)."""
    carrying = obs[..., OFF_CARRY:OFF_CARRY + 1] > 0.5
    station = np.concatenate([obs[..., OFF_STATION:OFF_STATION + 5], np.ones_like(carrying, np.float32)], -1)
    order = obs[..., OFF_ORDERS:OFF_ORDERS + 6]
    return np.where(carrying, station, order)


def play(cfg: WarehouseConfig, dispatcher: str, episodes: int, seed: int, interval: int = 4) -> np.ndarray:
    """Per-episode delivery rates of the scripted robots under `dispatcher`."""
    env = make_batch(cfg, episodes, seed)
    rng = np.random.default_rng(seed)
    goals = rng.integers(0, 4, (episodes, env.n_robots))
    for t in range(cfg.max_steps):
        if dispatcher == "no zones":
            task = own_task(env.obs)
        else:
            if t % interval == 0:
                goals = (rng.integers(0, 4, goals.shape) if dispatcher == "random" else nearest_zone(env, rng))
            task = env.goal_features(goals)
        obs = np.concatenate([env.obs, task], axis=2)
        env.step(greedy_low(Decision(2, obs, env.alive.copy(), None, env.t.copy())))
    return np.array([env.episode_info(e)["delivery_rate"] for e in range(episodes)])


def play_library(run: str, overrides: dict[str, str], dispatcher: str, episodes: int, seed: int) -> dict[str, float]:
    """A skill library's robots under `dispatcher` (`random`, `nearest` or `zone 0`): the mean
    delivery rate over `episodes` episodes and the share of picks made in the robot's goal zone."""
    import hdppo
    from hdppo.scenarios.warehouse import WarehouseParallelEnv
    rng = np.random.default_rng(seed)
    held: dict[str, WarehouseParallelEnv] = {}
    fixed = {"random": None,                                         # the run's own (untrained) mid: uniform
             "nearest": lambda d: nearest_zone(held["env"].batch, rng),   # mid's slot s is robot s
             "zone 0": lambda d: np.zeros(d.mask.shape, np.int64)}[dispatcher]
    team = hdppo.load(run, overrides=overrides, seed=seed, scripted={"mid": fixed} if fixed else None)
    env = held["env"] = WarehouseParallelEnv(team.cfg)
    rates, picks, in_goal = [], 0, 0
    for episode in range(episodes):
        observations, infos = env.reset(seed=seed + episode)
        team.reset()
        while env.agents:
            actions = team.act(observations, infos, agents=env.agents, sim=env.batch)
            goals = np.array([team.goals()["low"][u] for u in env.batch.units])
            observations, _, _, _, infos = env.step(actions)
            picked = env.batch.last_pick[0]
            picks += int((picked >= 0).sum())
            in_goal += int(((picked >= 0) & (picked == goals)).sum())
        rates.append(env.batch.episode_info(0)["delivery_rate"])
    return {"delivery_rate": float(np.mean(rates)), "picks_in_goal_zone": in_goal / max(picks, 1), "picks": picks}


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a warehouse config key")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--library", metavar="RUN", help="also play this skill run's robots (see the docstring)")
    p.add_argument("--library-episodes", type=int, default=20)
    a = p.parse_args(argv)
    cfg = apply_overrides(WarehouseConfig(), parse_assignments(a.set), what="warehouse config")
    print(f"warehouse {' '.join(a.set) or '(default)'}: scripted robots, {a.episodes} episodes, seed {a.seed}")
    for name in DISPATCHERS:
        r = play(cfg, name, a.episodes, a.seed)
        half = 1.96 * r.std(ddof=1) / np.sqrt(len(r))
        print(f"  {name:9s} delivery_rate {r.mean():.3f} [{r.mean() - half:.3f}, {r.mean() + half:.3f}]")
    if a.library:
        overrides = parse_assignments(a.set)
        print(f"skill library {a.library}: {a.library_episodes} episodes, seed {a.seed}")
        for name in ("random", "nearest", "zone 0"):
            out = play_library(a.library, overrides, name, a.library_episodes, a.seed)
            print(f"  {name:9s} delivery_rate {out['delivery_rate']:.3f}, picks in the goal zone "
                  f"{out['picks_in_goal_zone']:.2f} of {out['picks']}")


if __name__ == "__main__":
    main()
