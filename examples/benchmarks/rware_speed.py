"""rware stepping speed: the native batch (hdppo.sims.rware_batch) against rware 2.0 itself through
hdppo's PettingZoo adapter, E copies each, random actions.

    python examples/benchmarks/rware_speed.py [--size tiny-4ag] [--hard] [--envs 8] [--seconds 3]
                                              [--repeats 3] [--layers 1] [--set w_int.low=0.05]

Prints env steps/s (copies x steps) of:
- `env`: `step` then `reset_done(done)` of E copies, what hdppo's workers call: `PettingZooBatch`
  over the scenario's PettingZoo env (rware's own Warehouse), then `RwareBatch`;
- `hierarchy`: `HierarchyEnv.step` of the scenario (its hooks on: goals, intrinsic rewards, shaping)
  with uniform random policies on each env, so the ratio a rollout sees without the networks.
Each figure is the best of `--repeats` runs of `--seconds`, the ways interleaved (on a shared
machine the best run is the one least disturbed).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.*
from examples.benchmarks.timing import rate


def main() -> None:
    from hdppo.scenarios.rware import SCENARIO, episode_info, queue_size
    from hdppo.sims.pettingzoo import PettingZooBatch
    from hdppo.team.controllers import uniform_policy
    from hdppo.team.hierarchy import HierarchyEnv

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="tiny-4ag")
    p.add_argument("--hard", action="store_true")
    p.add_argument("--envs", type=int, default=8)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--set", nargs="*", default=[], help="more scenario keys, e.g. w_int.low=0.05")
    args = p.parse_args()
    keys = {"size": args.size, "hard": args.hard, "layers": args.layers, **dict(s.split("=", 1) for s in args.set)}
    cfg = SCENARIO.make_config(keys)
    robots, _ = queue_size(cfg)
    E = args.envs
    rng = np.random.default_rng(0)

    def adapter():
        return PettingZooBatch(lambda: SCENARIO.env(cfg), [f"robot_{i}" for i in range(robots)], E, None,
                               episode_info)

    def env_stepper(env) -> Callable[[], object]:
        env.reset(seed=0)

        def step() -> None:
            out = env.step(rng.integers(0, 5, (E, robots)))
            env.reset_done(out.done)
        return step

    def hier_stepper(env) -> Callable[[], object]:
        h = HierarchyEnv(SCENARIO, cfg, n_envs=E, seed=0, env=env)
        policies = [uniform_policy(info, 0) for info in h.info]
        return lambda: h.step(lambda d: policies[d.layer](d))

    batched = SCENARIO.batched_env
    assert batched is not None                          # the rware scenario's own batched env
    ways = {"env: rware via adapter": env_stepper(adapter()),
            "env: RwareBatch": env_stepper(batched(cfg, E, 0)),
            "hierarchy: rware via adapter": hier_stepper(adapter()),
            "hierarchy: RwareBatch": hier_stepper(None)}
    best = dict.fromkeys(ways, 0.0)
    for _ in range(args.repeats):
        for name, step in ways.items():
            best[name] = max(best[name], rate(step, E, args.seconds))
    print(f"rware {keys}, E={E}: env steps/s, best of {args.repeats} x {args.seconds:g} s")
    for name, r in best.items():
        print(f"  {name:30s} {r:10,.0f}")
    for part in ("env", "hierarchy"):
        print(f"  {part} ratio: {best[f'{part}: RwareBatch'] / best[f'{part}: rware via adapter']:.1f}x")


if __name__ == "__main__":
    main()
