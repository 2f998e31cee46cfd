"""Reference throughput: RLlib PPO training on MPE2 ``simple_spread``.

hdppo's benchmark compares its own training throughput against this number.
:func:`rllib_ppo_steps_per_second` starts a private local Ray instance
(never joins an existing cluster; no dashboard), trains RLlib's PPO (new API stack: ``RLModule``/``Learner``/
``EnvRunner``, the 2.x default) with ONE shared module for all agents on
``mpe2.simple_spread_v3.parallel_env(N=n_agents, continuous_actions=False)``
wrapped in :class:`ray.rllib.env.wrappers.pettingzoo_env.ParallelPettingZooEnv`,
and reports the training throughput measured from RLlib's own step counters
and wall-clock time around ``algo.train()``.

Step counting
-------------
RLlib's ``AlgorithmConfig.multi_agent(count_steps_by=...)`` defaults to
``"env_steps"`` and this module sets it explicitly.  With the
``ParallelPettingZooEnv`` wrapper all agents act in every ``env.step()``, so
one RLlib *env step* is one call of the parallel env's ``step`` = every agent
acting once, i.e. ``n_agents`` *agent steps*.  Therefore:

* ``train_batch_size`` (passed as ``train_batch_size_per_learner``; there is a
  single local learner) is measured in **env steps**: each ``train()`` samples
  ``train_batch_size`` env steps = ``train_batch_size * n_agents`` agent
  transitions;
* ``minibatch_size`` is NOT converted: RLlib's learner splits the multi-agent
  batch into minibatches of ``minibatch_size`` rows of the (single, shared)
  module, i.e. agent transitions.  So the number of SGD steps per iteration is
  about ``num_epochs * train_batch_size * n_agents / minibatch_size`` and grows
  with ``n_agents`` (RLlib also adds one bootstrap row per agent per episode
  chunk: 1000 env steps at N=6 train 4 * 6240 module rows);
* the returned ``env_steps`` / ``env_steps_per_s`` are env steps (all agents
  act once); ``agent_steps_per_s`` is the corresponding agent-step rate.

Counters used (Ray 2.60 result dict): ``result["env_runners"]
["num_env_steps_sampled_lifetime"]`` and ``result["env_runners"]
["num_agent_steps_sampled_lifetime"]`` (a per-agent dict in 2.60, summed here;
``n_agents * env_steps`` is used if it is missing).  Throughput is the
difference of the lifetime counters across the timed iterations divided by
the wall time of those ``train()`` calls (sampling + learning + weight sync).

Known RLlib slowdown (Ray 2.60)
------------------------------
``MultiAgentEnvRunner._sample`` calls ``episode.to_numpy()`` on *every*
episode finished so far in the current ``sample()`` call after *every* env
step, so one ``sample()`` call costs O(fragment_length * finished_episodes).
With RLlib's default ``rollout_fragment_length="auto"`` and one EnvRunner the
fragment is the whole train batch (4000 env steps = 160 episodes of 25
steps), which roughly halves throughput at N=6.  ``rollout_fragment_length``
(e.g. 200) avoids it without changing the train batch; the default here
stays ``"auto"`` to measure RLlib as configured out of the box.

Threads: the local Learner runs in the calling process
(``torch.set_num_threads(1)`` for the duration of the call, then restored);
EnvRunner actors get ``OMP_NUM_THREADS=1`` etc. through Ray's
``runtime_env`` (RLlib's ``python_environment()`` settings are only read by
the old API stack's RolloutWorker).

Run ``python -m hdppo.analysis.bench_rllib --help`` for the command line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

__all__ = ["rllib_ppo_steps_per_second"]

_ENV_NAME = "hdppo_bench_mpe2_simple_spread"
_MODULE_ID = "shared"
_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def _make_env(env_config: dict) -> Any:
    # Imported lazily so this runs inside the Ray EnvRunner process too.
    from mpe2 import simple_spread_v3
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(
        simple_spread_v3.parallel_env(
            N=int(env_config["n_agents"]),
            max_cycles=int(env_config["max_cycles"]),
            continuous_actions=False,
        )
    )


def _map_all_to_shared(agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
    return _MODULE_ID


def _counter(value: Any) -> float:
    """RLlib counters are plain numbers or per-agent/per-module dicts."""
    if isinstance(value, dict):
        return float(sum(_counter(v) for v in value.values()))
    return float(value)


def _lifetime_counts(result: dict, n_agents: int) -> tuple[float, float]:
    runners = result.get("env_runners", {})
    if "num_env_steps_sampled_lifetime" in runners:
        env_steps = _counter(runners["num_env_steps_sampled_lifetime"])
    else:  # older result layout
        env_steps = _counter(result["num_env_steps_sampled_lifetime"])
    agent = runners.get("num_agent_steps_sampled_lifetime")
    agent_steps = _counter(agent) if agent is not None else env_steps * n_agents
    return env_steps, agent_steps


def rllib_ppo_steps_per_second(
    n_agents: int = 6,
    max_cycles: int = 25,
    train_batch_size: int = 4000,
    minibatch_size: int = 128,
    num_epochs: int = 4,
    num_env_runners: int = 1,
    envs_per_runner: int = 1,
    iterations: int = 5,
    warmup_iterations: int = 1,
    hidden: tuple[int, ...] = (64, 64),
    seed: int = 0,
    rollout_fragment_length: int | str = "auto",
) -> dict:
    """Train RLlib PPO on simple_spread and measure its throughput.

    ``train_batch_size`` is in env steps (see the module docstring);
    ``num_env_runners=0`` samples in the driver process.  Returns a dict with
    ``env_steps_per_s``, ``agent_steps_per_s``, ``env_steps`` (sampled during
    the timed iterations), ``seconds`` (wall time of the timed ``train()``
    calls), ``train_batch_size`` and ``ray_version``.  Ray is always shut
    down before returning.

    ``rollout_fragment_length`` is passed to RLlib unchanged; the default
    ``"auto"`` (RLlib's default) makes every EnvRunner sample its whole share
    of the train batch in one ``sample()`` call, which is quadratic in RLlib
    2.60's multi-agent runner (see "Known RLlib slowdown" in the module
    docstring).  A small value such as ``200`` keeps the same train batch
    but collects it in several ``sample()`` calls.
    """
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    if warmup_iterations < 0:
        raise ValueError("warmup_iterations must be >= 0")

    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    # A private local instance (not ``address="auto"``): it never joins an
    # existing cluster.  If the caller already has Ray initialised this raises
    # instead of silently sharing (and later shutting down) the caller's Ray.
    ray.init(
        address="local",              # a new instance even where another Ray runs on this machine
        # 2 CPUs (this machine); more logical CPUs only when more EnvRunners
        # (1 CPU each) are requested, so their actors can be scheduled at all.
        num_cpus=max(2, num_env_runners + 1),
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=False,
        # Env vars set at worker start are what make torch/numpy in the
        # EnvRunner actors single-threaded; RLlib's python_environment()
        # setting is only read by the old-stack RolloutWorker.
        runtime_env={"env_vars": dict(_THREAD_ENV)},
    )
    # The local Learner (num_learners=0) runs in this driver process; the
    # caller's setting is restored afterwards.
    previous_threads = torch.get_num_threads()
    algo = None
    try:
        torch.set_num_threads(1)
        register_env(_ENV_NAME, _make_env)
        config = (
            PPOConfig()
            .environment(
                _ENV_NAME,
                env_config={"n_agents": n_agents, "max_cycles": max_cycles},
            )
            .framework("torch")
            .env_runners(
                num_env_runners=num_env_runners,
                num_envs_per_env_runner=envs_per_runner,
                num_cpus_per_env_runner=1,
                rollout_fragment_length=rollout_fragment_length,
                batch_mode="truncate_episodes",
            )
            .learners(num_learners=0, num_gpus_per_learner=0)
            .resources(num_cpus_for_main_process=1)
            .multi_agent(
                policies={_MODULE_ID},
                policy_mapping_fn=_map_all_to_shared,
                count_steps_by="env_steps",
            )
            .rl_module(
                rl_module_spec=MultiRLModuleSpec(
                    rl_module_specs={_MODULE_ID: RLModuleSpec()}
                ),
                model_config=DefaultModelConfig(
                    fcnet_hiddens=list(hidden), fcnet_activation="tanh"
                ),
            )
            .training(
                train_batch_size_per_learner=train_batch_size,
                minibatch_size=minibatch_size,
                num_epochs=num_epochs,
            )
            .debugging(seed=seed, log_level="ERROR")
            .reporting(min_time_s_per_iteration=0, min_sample_timesteps_per_iteration=0)
        )
        algo = config.build_algo()

        # Lifetime counters are cumulative; the timed window starts after the
        # last warm-up result (or at 0 when there is no warm-up, in which case
        # the timed window includes the first, slower iteration).
        start_env, start_agent = 0.0, 0.0
        for _ in range(warmup_iterations):
            start_env, start_agent = _lifetime_counts(algo.train(), n_agents)
        t0 = time.perf_counter()
        result: dict = {}
        for _ in range(iterations):
            result = algo.train()
        seconds = time.perf_counter() - t0
        end_env, end_agent = _lifetime_counts(result, n_agents)
        env_steps = end_env - start_env
        agent_steps = end_agent - start_agent
        return {
            "env_steps_per_s": env_steps / seconds,
            "agent_steps_per_s": agent_steps / seconds,
            "env_steps": int(env_steps),
            "seconds": seconds,
            "train_batch_size": train_batch_size,
            "ray_version": ray.__version__,
        }
    finally:
        if algo is not None:
            try:
                algo.stop()
            except Exception:
                pass
        ray.shutdown()
        torch.set_num_threads(previous_threads)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="RLlib PPO training throughput on MPE2 simple_spread (env steps/s)."
    )
    parser.add_argument("--n-agents", type=int, default=6)
    parser.add_argument("--max-cycles", type=int, default=25)
    parser.add_argument("--train-batch-size", type=int, default=4000, help="in env steps")
    parser.add_argument("--minibatch-size", type=int, default=128, help="in agent transitions")
    parser.add_argument("--num-epochs", type=int, default=4)
    parser.add_argument("--num-env-runners", type=int, default=1)
    parser.add_argument("--envs-per-runner", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup-iterations", type=int, default=1)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rollout-fragment-length",
        default="auto",
        help='env steps per EnvRunner.sample() call; "auto" (RLlib default) = whole batch',
    )
    args = parser.parse_args(argv)
    result = rllib_ppo_steps_per_second(
        n_agents=args.n_agents,
        max_cycles=args.max_cycles,
        train_batch_size=args.train_batch_size,
        minibatch_size=args.minibatch_size,
        num_epochs=args.num_epochs,
        num_env_runners=args.num_env_runners,
        envs_per_runner=args.envs_per_runner,
        iterations=args.iterations,
        warmup_iterations=args.warmup_iterations,
        hidden=tuple(args.hidden),
        seed=args.seed,
        rollout_fragment_length=(
            args.rollout_fragment_length
            if args.rollout_fragment_length == "auto"
            else int(args.rollout_fragment_length)
        ),
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
