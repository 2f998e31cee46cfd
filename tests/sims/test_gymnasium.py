"""`GymnasiumMultiAgent`: a gymnasium multi-agent env (tuple spaces, list rewards, one done) as a
PettingZoo ParallelEnv. Its steps are the wrapped env's own, its one `done` is split into
terminated / truncated by the rules of hdppo/sims/gymnasium.py, it passes PettingZoo's API test and
it is seeded by `reset(seed)`."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import parallel_api_test

from hdppo.errors import ScenarioError
from hdppo.sims import GymnasiumMultiAgent
from hdppo.sims.pettingzoo import PettingZooBatch


class TeamEnv(gym.Env):
    """A gym env for a team of n, in the lbforaging / ma-gym style: tuple spaces, a list of rewards
    (agent i gets 10 * (i + 1) + t), one `done` at step `end_at` (its own end) or at its own step
    limit `_max_episode_steps` (a time limit it does not flag), seeded observations."""

    def __init__(self, n: int = 2, end_at: int | None = None, limit: int | None = 6, old_api: bool = False,
                 per_agent_done: dict[int, int] | None = None, scalar_reward: bool = False,
                 timelimit_info: bool = False) -> None:
        self.n, self.end_at, self.old_api = n, end_at, old_api
        if limit is not None:
            self._max_episode_steps = limit
        self.limit = limit
        self.per_agent_done = per_agent_done or {}
        self.scalar_reward, self.timelimit_info = scalar_reward, timelimit_info
        self.observation_space = spaces.Tuple([spaces.Box(0.0, 1.0, (3,), np.float32)] * n)
        self.action_space = spaces.Tuple([spaces.Discrete(4)] * n)
        self.t = 0
        self.actions: list[tuple] = []

    def _obs(self):
        return tuple(self.np_random.random(3).astype(np.float32) for _ in range(self.n))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, actions):
        self.actions.append(tuple(int(a) for a in actions))
        self.t += 1
        rewards = 7.0 if self.scalar_reward else [10.0 * (i + 1) + self.t for i in range(self.n)]
        own_end = self.end_at is not None and self.t >= self.end_at
        at_limit = self.limit is not None and self.t >= self.limit
        done = own_end or at_limit
        if self.per_agent_done:
            done = [done or self.t >= self.per_agent_done.get(i, 10**9) for i in range(self.n)]
        info = {"TimeLimit.truncated": at_limit and not own_end} if self.timelimit_info and done else {}
        if self.old_api:
            return self._obs(), rewards, done, info
        return self._obs(), rewards, done, False, info


def run(env: GymnasiumMultiAgent, steps: int, seed: int = 0) -> list[tuple]:
    """(rewards, terminated, truncated) of each step until the episode ends, actions 1 for every agent."""
    env.reset(seed=seed)
    out = []
    for _ in range(steps):
        _, rew, term, trunc, _ = env.step({a: 1 for a in env.agents})
        out.append((rew, term, trunc))
        if not env.agents:
            break
    return out


def lbforaging_env(**kw) -> gym.Env:
    pytest.importorskip("lbforaging", reason="lbforaging is the gymnasium-ma extra: pip install 'hdppo[gymnasium-ma]'")
    return gym.make("Foraging-8x8-2p-1f-v3", disable_env_checker=True, **kw)


# ---- the wrapped env's own steps -----------------------------------------------------------------
def test_steps_equal_the_wrapped_envs_own_for_the_same_seed_and_actions():
    raw, wrapped = lbforaging_env(), GymnasiumMultiAgent(lbforaging_env())
    rng = np.random.default_rng(5)
    obs_raw, _ = raw.reset(seed=11)
    obs, infos = wrapped.reset(seed=11)
    assert wrapped.possible_agents == ["agent_0", "agent_1"] and set(infos) == set(wrapped.agents)
    for i, a in enumerate(wrapped.possible_agents):
        np.testing.assert_array_equal(obs[a], obs_raw[i])
        assert wrapped.observation_space(a) is wrapped.env.observation_space[i] == raw.observation_space[i]
        assert wrapped.action_space(a) is wrapped.env.action_space[i] == raw.action_space[i]
    for _ in range(200):
        acts = tuple(int(x) for x in rng.integers(0, 6, 2))
        obs_raw, rew_raw, done, _, _ = raw.step(acts)
        obs, rew, term, trunc, _ = wrapped.step(dict(zip(wrapped.possible_agents, acts)))
        for i, a in enumerate(wrapped.possible_agents):
            np.testing.assert_array_equal(obs[a], obs_raw[i])
            assert rew[a] == rew_raw[i]
            assert term[a] or trunc[a] if done else not (term[a] or trunc[a])
        if done:
            assert wrapped.agents == []
            obs_raw, _ = raw.reset()
            obs, _ = wrapped.reset()
            np.testing.assert_array_equal(obs["agent_0"], obs_raw[0])


def test_lbforaging_ends_at_its_own_50_step_limit_as_a_truncation():
    env = GymnasiumMultiAgent(lbforaging_env())
    assert env.time_limit == 50 and env.env_limit == 50
    steps = run_noop(env)
    assert len(steps) == 50
    _, term, trunc = steps[-1]
    assert trunc == {"agent_0": True, "agent_1": True} and not any(term.values())


def test_a_gymnasium_time_limit_is_a_truncation():
    env = GymnasiumMultiAgent(lbforaging_env(max_episode_steps=12))
    assert env.time_limit == 12
    steps = run_noop(env)
    assert len(steps) == 12 and all(steps[-1][2].values()) and not any(steps[-1][1].values())


def run_noop(env: GymnasiumMultiAgent) -> list[tuple]:
    env.reset(seed=0)
    out = []
    while env.agents:
        _, rew, term, trunc, _ = env.step({a: 0 for a in env.agents})   # lbforaging's NONE: the food stays
        out.append((rew, term, trunc))
    return out


# ---- splitting one done --------------------------------------------------------------------------
def test_an_end_before_the_envs_limit_is_a_termination():
    steps = run(GymnasiumMultiAgent(TeamEnv(end_at=3, limit=6)), 10)
    assert len(steps) == 3
    assert steps[-1][1] == {"agent_0": True, "agent_1": True} and not any(steps[-1][2].values())


def test_an_end_at_the_envs_own_limit_is_a_truncation_unless_terminal_says_so():
    steps = run(GymnasiumMultiAgent(TeamEnv(limit=6)), 10)
    assert len(steps) == 6 and all(steps[-1][2].values()) and not any(steps[-1][1].values())
    assert all(not any(t.values()) and not any(u.values()) for _, t, u in steps[:-1])
    # the env's own end on the limit's step: terminal(env) tells
    steps = run(GymnasiumMultiAgent(TeamEnv(end_at=6, limit=6), terminal=lambda e: e.unwrapped.t >= 6), 10)
    assert all(steps[-1][1].values()) and not any(steps[-1][2].values())


def test_old_gym_four_tuples_and_their_timelimit_info_are_read():
    steps = run(GymnasiumMultiAgent(TeamEnv(limit=4, old_api=True, timelimit_info=True)), 10)
    assert len(steps) == 4 and all(steps[-1][2].values()) and not any(steps[-1][1].values())
    steps = run(GymnasiumMultiAgent(TeamEnv(end_at=2, limit=4, old_api=True, timelimit_info=True)), 10)
    assert len(steps) == 2 and all(steps[-1][1].values())


def test_time_limit_none_makes_every_end_a_termination_and_an_int_cuts_episodes():
    steps = run(GymnasiumMultiAgent(TeamEnv(limit=6), time_limit=None), 10)
    assert len(steps) == 6 and all(steps[-1][1].values()) and not any(steps[-1][2].values())
    env = GymnasiumMultiAgent(TeamEnv(limit=None), time_limit=4)
    assert env.time_limit == 4
    steps = run(env, 10)
    assert len(steps) == 4 and all(steps[-1][2].values()) and not any(steps[-1][1].values())


def test_per_agent_dones_remove_that_agent_which_then_gets_a_noop():
    inner = TeamEnv(n=3, limit=6, per_agent_done={1: 2})
    env = GymnasiumMultiAgent(inner, ["a", "b", "c"])
    env.reset(seed=0)
    _, _, term, _, _ = env.step({"a": 3, "b": 3, "c": 3})
    assert not any(term.values())
    _, rew, term, _, _ = env.step({"a": 3, "b": 3, "c": 3})
    assert term == {"a": False, "b": True, "c": False} and env.agents == ["a", "c"]
    obs, rew, term, trunc, infos = env.step({"a": 2, "c": 2})
    assert set(obs) == set(rew) == set(infos) == {"a", "c"}
    assert inner.actions[-1] == (2, 0, 2)                  # the agent that left is stepped with Discrete's start


def test_rewards_lists_per_agent_and_a_scalar_reward_for_all():
    steps = run(GymnasiumMultiAgent(TeamEnv(n=3, limit=3)), 5)
    assert [s[0] for s in steps] == [{"agent_0": 10.0 + t, "agent_1": 20.0 + t, "agent_2": 30.0 + t}
                                     for t in (1, 2, 3)]
    steps = run(GymnasiumMultiAgent(TeamEnv(limit=2, scalar_reward=True)), 5)
    assert steps[0][0] == {"agent_0": 7.0, "agent_1": 7.0}


# ---- PettingZoo's API and seeding --------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: GymnasiumMultiAgent(TeamEnv(n=3, end_at=5, limit=8)),
    lambda: GymnasiumMultiAgent(TeamEnv(n=3, limit=8, per_agent_done={0: 2, 2: 5})),
    lambda: GymnasiumMultiAgent(TeamEnv(limit=None), time_limit=7),
    lambda: GymnasiumMultiAgent(lbforaging_env()),
], ids=["own_end", "per_agent_done", "wrapper_limit", "lbforaging"])
def test_parallel_api_test_passes(make):
    env = make()
    parallel_api_test(env, num_cycles=120)          # raises on any breach of the ParallelEnv API
    obs, infos = env.reset(seed=0)                  # and the env still serves every agent afterwards
    assert set(obs) == set(infos) == set(env.possible_agents) == set(env.agents)
    for agent, ob in obs.items():
        assert env.observation_space(agent).contains(ob), agent


def test_reset_seed_makes_episodes_reproducible():
    def episode(seed):
        env = GymnasiumMultiAgent(lbforaging_env())
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(0)
        trace = [np.concatenate([*obs.values(), np.zeros(2, np.float32)])]
        while env.agents:
            obs, rew, *_ = env.step({a: int(rng.integers(6)) for a in env.agents})
            trace.append(np.concatenate([*obs.values(), np.array(list(rew.values()), np.float32)]))
        return np.stack(trace)

    np.testing.assert_array_equal(episode(4), episode(4))
    assert not np.array_equal(episode(4)[0], episode(5)[0])


def test_a_batch_of_copies_is_seeded_copy_by_copy():
    """PettingZooBatch resets copy e with seed + e: its observations are single wrappers' with those seeds."""
    batch = PettingZooBatch(lambda: GymnasiumMultiAgent(lbforaging_env()), ["agent_0", "agent_1"], 3)
    batch.reset(seed=20)
    for e in range(3):
        single, _ = GymnasiumMultiAgent(lbforaging_env()).reset(seed=20 + e)
        np.testing.assert_array_equal(batch.obs[e], np.stack([single["agent_0"], single["agent_1"]]))


# ---- refusals ----------------------------------------------------------------------------------------
def test_an_env_without_per_agent_spaces_is_refused_with_a_fix():
    with pytest.raises(ScenarioError, match="not one space per agent") as err:
        GymnasiumMultiAgent(gym.make("CartPole-v1"))
    assert "Tuple" in err.value.fix


def test_agent_names_must_match_the_envs_agents():
    with pytest.raises(ScenarioError, match="do not name"):
        GymnasiumMultiAgent(TeamEnv(n=3), ["a", "b"])
    with pytest.raises(ScenarioError, match="time_limit"):
        GymnasiumMultiAgent(TeamEnv(), time_limit=0)
