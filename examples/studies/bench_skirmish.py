"""`python -m examples.studies.bench_skirmish`: raw speed of the skirmish simulator (no policies, no learning).

Steps `--envs` copies of `SkirmishBatch` in one process with random legal actions (drawn from the
action mask) and auto-resets, and prints batch steps/s and unit-steps/s (copies x units per batch
step), best of `--repeats` timed windows. Pin it to one core with `taskset -c 0`.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def raw_speed(n_envs: int = 16, seconds: float = 3.0, overrides: dict | None = None) -> tuple[float, float, float]:
    """(batch steps/s, unit-steps/s, batch steps per CPU-second) of SkirmishBatch, random legal actions.

    The CPU-time rate is what one core gives when the process is not preempted by other loads."""
    from hdppo.scenarios.skirmish.sim import SkirmishBatch
    from hdppo.team.scenario import load_scenario
    cfg = load_scenario("skirmish").make_config(overrides or {})
    env = SkirmishBatch(cfg, n_envs, seed=0)
    rng = np.random.default_rng(0)
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        actions = np.where(env.action_mask, rng.random(env.action_mask.shape), -1.0).argmax(-1)
        out = env.step(actions)
        if out.done.any():
            env.reset_done(out.done)
        n += 1
    rate = n / (time.perf_counter() - t0)
    return rate, rate * n_envs * env.U, n / max(time.process_time() - c0, 1e-9)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("overrides", nargs="*", help="skirmish config key=value (e.g. n_squads=6)")
    args = ap.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in args.overrides)
    best = max((raw_speed(args.envs, args.seconds, overrides) for _ in range(args.repeats)), key=lambda r: r[0])
    per_step = best[1] / best[0]                         # unit-steps per batch step
    print(f"skirmish raw speed, {args.envs} copies x {per_step / args.envs:.0f} units, random legal actions "
          f"(best of {args.repeats}):\n"
          f"  wall: {best[0]:,.0f} batch steps/s = {best[1]:,.0f} unit-steps/s\n"
          f"  CPU:  {best[2]:,.0f} batch steps/s = {best[2] * per_step:,.0f} unit-steps/s per CPU-second")


if __name__ == "__main__":
    main()
