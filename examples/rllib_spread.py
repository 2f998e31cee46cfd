"""Train the `spread` hierarchy with RLlib PPO: one RLModule per layer, every slot an RLlib agent.

    python examples/rllib_spread.py --iterations 5 --layers 3

Needs `pip install -e .[ray]`. "env steps" printed below are RLlib steps: one layer's decision or
one env step (see `hdppo.integrations.rllib`); a module's return is the sum over its slots of
their SMDP rewards, averaged over the episodes finished in the iteration.
"""
from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="RLlib PPO on the spread hierarchy (one module per layer)")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--layers", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--train-batch-size", type=int, default=1000, help="RLlib steps per iteration")
    parser.add_argument("--env-runners", type=int, default=0, help="0 samples in this process")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import ray

    from hdppo.integrations.rllib import rllib_ppo_config

    ray.init(address="local", num_cpus=max(args.num_cpus, args.env_runners + 1), include_dashboard=False,
             log_to_driver=False)
    algo = None
    try:
        config = rllib_ppo_config("spread", {"layers": args.layers}, seed=args.seed,
                                  num_env_runners=args.env_runners,
                                  train_batch_size_per_learner=args.train_batch_size)
        algo = config.build_algo()
        for it in range(1, args.iterations + 1):
            result = algo.train()
            runners = result.get("env_runners", {})
            steps = int(runners.get("num_env_steps_sampled_lifetime", 0))
            returns = runners.get("module_episode_returns_mean", {})
            text = "  ".join(f"{m}={float(v):9.2f}" for m, v in sorted(returns.items())) or "(no episode finished)"
            print(f"iter {it:3d}  env steps {steps:7d}  returns: {text}", flush=True)
    finally:
        if algo is not None:
            algo.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
