"""Smoke test for hdppo.analysis.bench_rllib (RLlib PPO reference throughput)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")          # the fast run works with .[test] alone

from hdppo.analysis.bench_rllib import rllib_ppo_steps_per_second  # noqa: E402


def test_tiny_rllib_ppo_run_reports_throughput_and_shuts_ray_down() -> None:
    result = rllib_ppo_steps_per_second(
        n_agents=3,
        max_cycles=10,
        train_batch_size=200,
        minibatch_size=50,
        num_epochs=1,
        iterations=1,
        warmup_iterations=0,
        num_env_runners=0,      # samples in the driver: the same report without an env runner to start
    )
    assert result["env_steps"] > 0
    assert result["env_steps_per_s"] > 0
    assert result["seconds"] > 0
    assert result["train_batch_size"] == 200
    assert result["ray_version"] == ray.__version__
    # One env step = every agent acts once (simple_spread has no agent deaths).
    assert result["agent_steps_per_s"] == pytest.approx(3 * result["env_steps_per_s"])
    assert not ray.is_initialized()
