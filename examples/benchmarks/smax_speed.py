"""SMAX stepping speed: JaxMARL's own vmapped, jitted step against hdppo's adapter (hdppo.sims.smax).

    taskset -c 0 python examples/benchmarks/smax_speed.py [--maps 3m 2s3z] [--envs 64 128] [--seconds 2]
                                                         [--repeats 3] [--threads one|multi]

Prints env-steps/s (copies x steps) of random actions for each map and copy count E:
- `raw`: `jax.jit(jax.vmap(env.step))` (JaxMARL's step, its auto-reset included), outputs left on
  the device (blocked on each step);
- `raw+asarray` / `raw+dlpack`: the same, with the observations, rewards, dones, avail actions and
  world state brought to numpy each step by `np.asarray` or `np.from_dlpack`;
- `adapter`: `SmaxBatch.step` then `reset_done(done)`, what hdppo's workers call.
Each figure is the best of `--repeats` runs of `--seconds`, the four ways interleaved (on a shared
machine the best run is the one least disturbed). `--threads multi` leaves XLA its default thread
pool (the adapter sets one thread unless XLA_FLAGS is set); `taskset -c 0` pins the process to one
core, as one hdppo worker runs.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.*
from examples.benchmarks.timing import rate


def raw_steppers(env, n_envs: int, rng: np.random.Generator) -> dict[str, Callable[[], None]]:
    """JaxMARL's step vmapped and jitted, with outputs left on the device or moved to numpy."""
    import jax
    import jax.numpy as jnp
    agents = env.agents

    def one(key, state, act):
        key, k = jax.random.split(key)
        obs, state, rew, dones, _ = env.step(k, state, {a: act[i] for i, a in enumerate(agents)})
        av = env.get_avail_actions(state)
        out = (jnp.stack([obs[a] for a in agents]), jnp.stack([rew[a] for a in agents]),
               jnp.stack([dones[a] for a in agents]), jnp.stack([av[a] for a in agents]), obs["world_state"])
        return key, state, out

    step = jax.jit(jax.vmap(one))
    keys = jax.random.split(jax.random.PRNGKey(0), n_envs)
    _, state = jax.jit(jax.vmap(env.reset))(keys)
    carry = {"keys": keys, "state": state}
    n_act = env.action_spaces[agents[0]].n

    def make(convert: Callable | None) -> Callable[[], None]:
        def go() -> None:
            act = jnp.asarray(rng.integers(0, n_act, (n_envs, len(agents))), jnp.int32)
            carry["keys"], carry["state"], out = step(carry["keys"], carry["state"], act)
            if convert is None:
                jax.block_until_ready(out)
            else:
                [convert(x) for x in out]
        return go

    return {"raw": make(None), "raw+asarray": make(np.asarray), "raw+dlpack": make(np.from_dlpack)}


def adapter_stepper(env, n_envs: int, rng: np.random.Generator) -> Callable[[], None]:
    from hdppo.sims.smax import SmaxBatch
    batch = SmaxBatch(env, n_envs, 0)
    batch.reset(0)
    assert batch.action_mask is not None                 # SMAX gives every unit its available actions
    n_act = batch.action_mask.shape[-1]

    def go() -> None:
        res = batch.step(rng.integers(0, n_act, batch.alive.shape))
        batch.reset_done(res.done)
    return go


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maps", nargs="+", default=["3m", "2s3z", "5m_vs_6m", "3s5z"])
    parser.add_argument("--envs", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", choices=["one", "multi"], default="one")
    args = parser.parse_args()
    if args.threads == "multi":
        os.environ["XLA_FLAGS"] = ""          # set (empty): the adapter then leaves XLA its defaults
    from hdppo.sims.jaxmarl import cached_env
    from hdppo.sims.smax import SMAX_DEFAULTS, smax_env
    print(f"XLA threads: {args.threads}; cpu affinity: {sorted(os.sched_getaffinity(0))}")
    print(f"{'map':>9} {'E':>5} {'raw':>9} {'raw+asarray':>12} {'raw+dlpack':>11} {'adapter':>9}   env-steps/s")
    for name in args.maps:
        env = cached_env(smax_env, dict(map_name=name, **SMAX_DEFAULTS))
        for n in args.envs:
            rng = np.random.default_rng(0)
            runs = {**raw_steppers(env, n, rng), "adapter": adapter_stepper(env, n, rng)}
            r = dict.fromkeys(runs, 0.0)
            for _ in range(args.repeats):
                for k, fn in runs.items():
                    r[k] = max(r[k], rate(fn, n, args.seconds))
            print(f"{name:>9} {n:>5} {r['raw']:>9,.0f} {r['raw+asarray']:>12,.0f} {r['raw+dlpack']:>11,.0f} "
                  f"{r['adapter']:>9,.0f}", flush=True)


if __name__ == "__main__":
    main()
