"""hdppo.integrations.rllib: the hierarchy as an RLlib MultiAgentEnv, and one PPO iteration on it."""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np
import pytest

from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario
from tests.helpers import needs

if TYPE_CHECKING:
    from hdppo.integrations.rllib import HierarchyMultiAgentEnv

pytestmark = needs("ray.rllib", "RLlib is not installed: pip install 'hdppo[ray]'")

SEED = 5
OVERRIDES = {"layers": 3}          # spread: high (interval 10) -> 2 mid squads (5) -> 6 units (1), 50 steps


def _env() -> HierarchyMultiAgentEnv:
    from hdppo.integrations.rllib import HierarchyMultiAgentEnv  # here, not at collection (RLlib: seconds)
    return HierarchyMultiAgentEnv({"scenario": "spread", "overrides": OVERRIDES, "seed": SEED})


def _random_episode(env: HierarchyMultiAgentEnv) -> dict:
    """One episode with seeded random actions; records everything the env returned."""
    rng = np.random.default_rng(0)
    obs, infos = env.reset(seed=SEED)
    rec = {"obs": [obs], "actions": [], "rewards": [], "terminateds": [], "truncateds": [], "infos": [infos]}
    while True:
        acts = {a: (int(rng.integers(env.action_spaces[a].n)) if isinstance(env.action_spaces[a], gym.spaces.Discrete)
                    else env.action_spaces[a].sample()) for a in obs}
        obs, rew, term, trunc, info = env.step(acts)
        for key, value in zip(("actions", "obs", "rewards", "terminateds", "truncateds", "infos"),
                              (acts, obs, rew, term, trunc, info)):
            rec[key].append(value)
        if term["__all__"] or trunc["__all__"]:
            return rec


def _reference_returns(rec: dict) -> tuple[dict, dict, list]:
    """Drive a plain HierarchyEnv with the same seed and the recorded actions, layer by layer in the
    order the RLlib env asked for them; returns per-slot summed SMDP rewards, close counts, and the
    decision observations each layer saw."""
    hier = HierarchyEnv(load_scenario("spread"), load_scenario("spread").make_config(OVERRIDES), n_envs=1,
                        seed=SEED, autoreset=False)
    hier.reset(SEED)
    names = [inf.name for inf in hier.info]
    queue = list(zip(rec["obs"][:-1], rec["actions"]))     # (obs given, actions answered) per RLlib step
    seen = []

    def act(d):
        obs, acts = queue.pop(0)
        info = hier.info[d.layer]
        deciding = {f"{info.name}:{info.slot_names[s]}": s for s in np.flatnonzero(d.mask[0])}
        assert set(acts) == set(deciding), "the RLlib env asked the layers in a different order"
        out = np.zeros((1, info.n_slots), dtype=np.int64)
        for aid, s in deciding.items():
            out[0, s] = acts[aid]
            seen.append((aid, obs[aid], d.obs[0, s]))
        return out

    returns, closes = defaultdict(float), defaultdict(int)
    while True:
        result = hier.step(act)
        for i, step in enumerate(result.layers):
            for s in np.flatnonzero(step.closed[0]):
                aid = f"{names[i]}:{hier.info[i].slot_names[s]}"
                returns[aid] += float(step.reward[0, s])
                closes[aid] += 1
        if result.done[0]:
            assert not queue, "the RLlib env asked for more decisions than the hierarchy makes"
            return returns, closes, seen


def test_env_passes_rllib_checker_and_matches_the_hierarchy_smdp_rewards() -> None:
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    from hdppo.integrations.rllib import policy_mapping_fn

    env = _env()
    check_multiagent_environments(env)
    assert {policy_mapping_fn(a) for a in env.possible_agents} == {"high", "mid", "low"}
    assert set(env.observation_spaces) == set(env.action_spaces) == set(env.possible_agents)

    rec = _random_episode(env)
    steps = len(rec["actions"])
    assert steps == 50 + 50 // 10 + 50 // 5               # env steps + high decisions + mid decisions
    # "__all__" ends the episode exactly once, at the last step; spread ends by its time limit
    alls = [(t["__all__"], u["__all__"]) for t, u in zip(rec["terminateds"], rec["truncateds"])]
    assert alls[:-1] == [(False, False)] * (steps - 1) and alls[-1] == (False, True)
    with pytest.raises(RuntimeError):
        env.step({})
    assert env.agents == []

    # each step's observations are one layer's (except the final, truncation observations)
    for obs in rec["obs"][:-1]:
        assert len({policy_mapping_fn(a) for a in obs}) == 1
    # every agent that gets an observation later gets a reward for its decision
    # (and no reward comes without a decision waiting for it)
    waiting: set = set()
    for t, obs in enumerate(rec["obs"]):
        if t:
            assert set(rec["rewards"][t - 1]) <= waiting
            waiting -= set(rec["rewards"][t - 1])
        if t < steps:                     # the last observations are final (truncation) ones
            waiting |= set(obs)
    assert waiting == set()
    # the last step closes every slot as truncated, with a final observation for bootstrapping
    last_info = rec["infos"][-1]
    assert set(rec["obs"][-1]) == set(rec["rewards"][-1]) == set(env.possible_agents)
    assert all(last_info[a].get("truncated") for a in env.possible_agents)
    assert set(rec["terminateds"][-1]) == {"__all__"}

    # rewards equal a plain HierarchyEnv's SMDP closes under the same seed and actions
    got, n_rewards = defaultdict(float), defaultdict(int)
    for rew in rec["rewards"]:
        for aid, r in rew.items():
            got[aid] += r
            n_rewards[aid] += 1
    want, closes, seen = _reference_returns(rec)
    assert set(got) == set(want) == set(env.possible_agents)
    for aid in want:
        assert got[aid] == pytest.approx(want[aid], rel=1e-6), aid
    assert dict(n_rewards) == dict(closes)
    assert {closes[a] for a in env.possible_agents if a.startswith("low:")} == {50}
    assert {closes[a] for a in env.possible_agents if a.startswith("mid:")} == {10}
    assert {closes[a] for a in env.possible_agents if a.startswith("high:")} == {5}
    # lower layers saw the goals their parents chose at the same step: observations match exactly
    for aid, ours, theirs in seen:
        np.testing.assert_array_equal(ours, theirs, err_msg=aid)
    # discounts: gamma^k of each layer's interval
    mid_disc = {round(i["discount"], 6) for info in rec["infos"][1:] for a, i in info.items() if a.startswith("mid:")}
    assert mid_disc == {round(0.99 ** 5, 6)}

    # RLlib's own episode bookkeeping accepts the stream: per-agent returns match, and the time
    # limit stays a truncation (bootstrapped), not a termination
    ep = MultiAgentEpisode(observation_space=gym.spaces.Dict(env.observation_spaces),
                           action_space=gym.spaces.Dict(env.action_spaces),
                           agent_to_module_mapping_fn=policy_mapping_fn)
    ep.add_env_reset(observations=rec["obs"][0], infos=rec["infos"][0])
    for t in range(steps):
        ep.add_env_step(observations=rec["obs"][t + 1], actions=rec["actions"][t], rewards=rec["rewards"][t],
                        infos=rec["infos"][t + 1], terminateds=rec["terminateds"][t], truncateds=rec["truncateds"][t])
    assert ep.is_done and ep.is_truncated and not ep.is_terminated
    for aid, sa in ep.agent_episodes.items():
        assert sa.get_return() == pytest.approx(want[aid], rel=1e-5), aid
        assert len(sa) == closes[aid] and sa.is_truncated and not sa.is_terminated
    env.close()


def test_one_rllib_ppo_iteration_trains_a_module_per_layer() -> None:
    import ray
    import torch

    from hdppo.integrations.rllib import rllib_ppo_config

    threads = torch.get_num_threads()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = None
    try:
        torch.set_num_threads(1)
        config = rllib_ppo_config("spread", OVERRIDES, seed=SEED, train_batch_size_per_learner=200,
                                  minibatch_size=64, num_epochs=1)
        algo = config.build_algo()
        result = algo.train()
        runners = result["env_runners"]
        assert float(runners["num_env_steps_sampled_lifetime"]) >= 200
        for layer in ("high", "mid", "low"):
            assert layer in result["learners"], sorted(result["learners"])
            assert np.isfinite(float(result["learners"][layer]["policy_loss"]))
            assert float(runners["num_module_steps_sampled"][layer]) > 0
            assert layer in runners["module_episode_returns_mean"]   # 200 steps hold three 65-step episodes
    finally:
        if algo is not None:
            algo.stop()
        ray.shutdown()
        torch.set_num_threads(threads)
    assert not ray.is_initialized()
