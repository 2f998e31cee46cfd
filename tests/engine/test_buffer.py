"""RolloutBuffer: decision rows [E, S], transitions closed when they end, open ones carried over; and
the worker's recording of a time limit (reward + gamma^k V(final obs), discount 0)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hdppo.engine.buffer import RolloutBuffer
from hdppo.engine.config import resolve_overrides, train_config_to_dict
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker, WorkerSpec
from hdppo.team.scenario import load_scenario

E, S, D = 2, 3, 4


def add(buf: RolloutBuffer, step: int, mask: np.ndarray) -> None:
    """A decision row whose obs, actions and values encode (step, env, slot)."""
    code = step * 100 + np.arange(E)[:, None] * 10 + np.arange(S)[None, :]
    obs = np.repeat(code[..., None], D, axis=2).astype(np.float32)
    buf.add(obs, mask, code.astype(np.int64), np.zeros((E, S), np.float32), code.astype(np.float32) / 1000, None, None)


def test_close_fills_the_row_where_each_transition_started():
    buf = RolloutBuffer(E, S)
    everyone = np.ones((E, S), bool)
    add(buf, 0, everyone)
    slot0 = np.zeros((E, S), bool)
    slot0[:, 0] = True
    buf.close(slot0, np.full((E, S), 5.0, np.float32), np.full((E, S), 0.9, np.float32))
    add(buf, 1, slot0)                                  # slot 0 decides again; slots 1, 2 still open
    buf.close(everyone, np.full((E, S), 7.0, np.float32), np.zeros((E, S), np.float32))
    r0, r1 = buf.rows
    np.testing.assert_array_equal(r0["rewards"][:, 0], 5.0)          # slot 0's first transition
    np.testing.assert_array_equal(r0["rewards"][:, 1:], 7.0)         # slots 1, 2: one long transition
    np.testing.assert_array_equal(r1["rewards"][:, 0], 7.0)
    assert r0["closed"].all() and r1["closed"][:, 0].all() and not r1["closed"][:, 1:].any()
    assert (buf.open_row == -1).all()


def test_close_ignores_slots_without_an_open_transition():
    buf = RolloutBuffer(E, S)
    mask = np.zeros((E, S), bool)
    mask[0, 1] = True
    add(buf, 0, mask)
    buf.close(np.ones((E, S), bool), np.ones((E, S), np.float32), np.zeros((E, S), np.float32))
    assert buf.rows[0]["closed"].sum() == 1 and buf.rows[0]["closed"][0, 1]


def test_take_returns_closed_transitions_and_carries_open_ones():
    buf = RolloutBuffer(E, S)
    everyone = np.ones((E, S), bool)
    add(buf, 0, everyone)
    buf.close(everyone, np.ones((E, S), np.float32), np.full((E, S), 0.9, np.float32))
    add(buf, 1, everyone)                               # the next decisions: open, they bootstrap row 0
    buf.env_steps = 1
    batch = buf.take(0.95, np.arange(S))
    assert len(batch) == E * S
    np.testing.assert_array_equal(batch.actions, np.arange(E * S) // S * 10 + np.arange(E * S) % S)
    v0 = (np.arange(E)[:, None] * 10 + np.arange(S)) / 1000
    v1 = (100 + np.arange(E)[:, None] * 10 + np.arange(S)) / 1000
    np.testing.assert_allclose(batch.returns, (1 + 0.9 * v1).reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(batch.advantages, (1 + 0.9 * v1 - v0).reshape(-1), rtol=1e-5)
    np.testing.assert_array_equal(batch.roles, np.tile(np.arange(S), E))
    # the open row is carried, re-indexed from 0, and counts no env steps yet
    assert len(buf.rows) == 1 and (buf.open_row == 0).all() and buf.env_steps == 0
    np.testing.assert_array_equal(buf.rows[0]["actions"], (100 + np.arange(E)[:, None] * 10 + np.arange(S)))
    assert not buf.rows[0]["closed"].any()


def test_take_with_nothing_decided_is_empty():
    batch = RolloutBuffer(E, S).take(0.95, np.arange(S))
    assert len(batch) == 0 and batch.stats["transitions"] == 0


def test_raw_reward_mean_is_before_normalisation():
    buf = RolloutBuffer(E, S)
    everyone = np.ones((E, S), bool)
    add(buf, 0, everyone)
    buf.close(everyone, np.full((E, S), 0.5, np.float32), np.zeros((E, S), np.float32),
              raw_rewards=np.full((E, S), 20.0, np.float32))
    batch = buf.take(0.95, np.arange(S))
    assert batch.stats["raw_reward_mean"] == pytest.approx(20.0)
    assert batch.stats["reward_mean"] == pytest.approx(0.5)


def test_worker_records_a_time_limit_as_reward_plus_discounted_final_value():
    """grid with max_steps=3: at the time limit each unit's transition stores r + gamma * V(final obs)
    with discount 0, V being the layer's (centralized) critic on LayerStep.final_obs."""
    from hdppo.engine.learner import critic_obs
    sc = load_scenario("grid")
    tc, _ = resolve_overrides({"envs_per_worker": "2", "rollout": "8"}, ["high", "mid", "low"], set())
    w = Worker(WorkerSpec("grid", {"max_steps": 3}, train_config_to_dict(tc), 0, ["low"]), MemoryParams())
    rt = w.by_name["low"]
    w._decide()
    for t in range(3):
        result = w._env_step()
        w._record(result)
        if t < 2:
            w._decide()
    step = result.layers[-1]
    row = rt.buffer.rows[-1]                       # the decisions of the last step, closed by the limit
    assert step.truncated.all() and step.final_obs is not None
    crit = critic_obs(step.final_obs, step.truncated)
    flat = lambda x: torch.as_tensor(x.reshape(-1, x.shape[-1]))  # noqa: E731
    with torch.no_grad():
        v = rt.policy.value(flat(step.final_obs), critic_obs=flat(crit)).numpy().reshape(step.reward.shape)
    gamma = sc.make_config().gamma
    np.testing.assert_allclose(row["rewards"], step.reward + gamma * v, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(row["raw_rewards"], step.reward)
    assert (row["discounts"] == 0).all() and row["closed"].all()
