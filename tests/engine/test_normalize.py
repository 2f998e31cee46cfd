"""hdppo.engine.normalize: the streaming mean/variance and the semi-MDP reward normaliser,
against numpy and hand loops."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.engine.normalize import RewardNormalizer, RunningMeanStd

PRIOR = 1e-4     # RunningMeanStd starts as one-ten-thousandth of a sample of mean 0, variance 1


def test_merged_batches_equal_numpy_over_all_data_with_uneven_sizes():
    rng = np.random.default_rng(0)
    sizes = [1, 7, 300, 2, 45, 1, 120]
    batches = [rng.normal(3.0, 2.5, size=n) for n in sizes]
    rms = RunningMeanStd()
    for i, b in enumerate(batches):
        rms.update(b)
        seen = np.concatenate(batches[:i + 1])
        if seen.size >= 50:     # the tiny prior is negligible from here on
            assert rms.mean == pytest.approx(seen.mean(), rel=1e-5)
            assert rms.var == pytest.approx(seen.var(), rel=1e-5)
    data = np.concatenate(batches)
    assert rms.count == pytest.approx(data.size + PRIOR)
    assert rms.mean == pytest.approx(data.mean(), rel=1e-6)
    assert rms.var == pytest.approx(data.var(), rel=1e-6)


def test_merge_of_two_dimensional_batches_and_exact_prior():
    # a [E, S] batch counts every element; with the prior the exact values are known in closed form
    x = np.array([[1.0, 2.0], [3.0, 6.0]])
    rms = RunningMeanStd()
    rms.update(x)
    n = x.size
    mean = x.sum() / (n + PRIOR)
    # pooled variance of {prior: mean 0, var 1, weight PRIOR} and {x: mean 3, var 3.5, weight 4}
    var = (1.0 * PRIOR + x.var() * n + x.mean() ** 2 * PRIOR * n / (n + PRIOR)) / (n + PRIOR)
    assert rms.mean == pytest.approx(mean, rel=1e-12) and rms.var == pytest.approx(var, rel=1e-12)
    rms.update(np.zeros(0))             # an empty batch changes nothing
    assert rms.mean == pytest.approx(mean, rel=1e-12) and rms.count == pytest.approx(n + PRIOR)


def _std_with_prior(values: list[float]) -> float:
    """Std of the values plus RunningMeanStd's prior pseudo-sample (mean 0, variance 1, weight PRIOR)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size + PRIOR
    m = x.sum() / n
    return float(np.sqrt((PRIOR * (1.0 + m ** 2) + ((x - m) ** 2).sum()) / n))


def _hand_loop(steps, n_slots):
    """Expected normalised rewards: per slot G = r + d_prev * G_prev (d_prev the previous transition's
    gamma^k, 0 after an episode end); the scale is the std of every G recorded so far."""
    G = [0.0] * n_slots
    carry = [1.0] * n_slots        # what G_prev is multiplied by at the slot's next close
    recorded: list[float] = []
    out = []
    for closed, rewards, discounts, ended in steps:
        for s in range(n_slots):
            if closed[s]:
                G[s] = rewards[s] + carry[s] * G[s]
                recorded.append(G[s])
        scale = _std_with_prior(recorded)
        out.append({s: rewards[s] / scale for s in range(n_slots) if closed[s]})
        for s in range(n_slots):
            if closed[s]:
                carry[s] = 0.0 if ended[s] else discounts[s]
    return out


def _run(norm, steps):
    outs = []
    for closed, rewards, discounts, ended in steps:
        out = norm(np.array([closed]), np.array([rewards], np.float32), np.array([discounts], np.float32),
                   np.array([ended]))
        assert out.dtype == np.float32 and out.shape == (1, len(closed))
        outs.append(out[0])
    return outs


def test_reward_scale_is_the_std_of_semi_mdp_discounted_returns():
    g = 0.9
    # (closed, rewards, discounts gamma^k, ended) for 2 slots; slot 1 stays open for two steps
    # (a semi-MDP transition of 3 env steps, discount g^3), slot 0 ends its episode at step 3
    steps = [
        ([True, True], [1.0, 2.0], [g, g], [False, False]),
        ([True, False], [0.5, 99.0], [g, 0.0], [False, False]),
        ([True, False], [-2.0, 99.0], [g ** 2, 0.0], [False, False]),
        ([True, True], [3.0, 4.0], [g, g ** 3], [True, False]),
        ([True, True], [1.5, -1.0], [g, g], [False, False]),
        ([False, True], [99.0, 2.5], [0.0, g], [False, True]),
        ([True, True], [0.25, 1.0], [g, g], [False, False]),
    ]
    want = _hand_loop(steps, 2)
    for got, exp in zip(_run(RewardNormalizer(1, 2), steps), want):
        for s, value in exp.items():
            assert got[s] == pytest.approx(value, rel=1e-4), (s, got, exp)


def test_episode_end_resets_the_return():
    # one slot, reward 1 each step, gamma 0.5: returns 1, 1.5 | end | 1, 1.5 (without the reset: 1.75, 1.875)
    steps = [([True], [1.0], [0.5], [ended]) for ended in (False, True, False, False)]
    got = [o[0] for o in _run(RewardNormalizer(1, 1), steps)]
    returns = [1.0, 1.5, 1.0, 1.5]
    for k in range(4):
        assert got[k] == pytest.approx(1.0 / _std_with_prior(returns[:k + 1]), rel=1e-4), k
    assert _hand_loop(steps, 1)[3][0] == pytest.approx(got[3], rel=1e-4)


def test_disabled_passes_rewards_through():
    norm = RewardNormalizer(2, 3, enabled=False)
    rewards = np.array([[1.0, -2.0, 3.5], [0.0, 7.0, -0.25]], np.float32)
    for _ in range(3):
        out = norm(np.ones((2, 3), bool), rewards, np.full((2, 3), 0.9, np.float32), np.zeros((2, 3), bool))
        np.testing.assert_array_equal(out, rewards)


def test_slots_that_did_not_close_are_untouched():
    # two env copies of one slot; copy 1 closes at steps 0 and 3 only. In between it is offered a huge
    # reward, a discount and an episode end, none of which may touch its return or the statistics:
    # its second return is 1 + 0.5 * 2 = 2
    steps = [
        ([True, True], [1.0, 2.0], [0.8, 0.5], [False, False]),
        ([True, False], [2.0, 1000.0], [0.8, 0.1], [False, True]),
        ([True, False], [-1.0, 1000.0], [0.8, 0.1], [False, True]),
        ([True, True], [0.5, 1.0], [0.8, 0.5], [False, False]),
    ]
    want = _hand_loop(steps, 2)
    norm = RewardNormalizer(2, 1)
    for (closed, rewards, discounts, ended), exp in zip(steps, want):
        col = lambda x, dt: np.array(x, dt).reshape(2, 1)  # noqa: E731
        out = norm(col(closed, bool), col(rewards, np.float32), col(discounts, np.float32), col(ended, bool))
        for s, value in exp.items():
            assert out[s, 0] == pytest.approx(value, rel=1e-4), (s, out, exp)
    returns = [1.0, 2.0, 2.0 + 0.8, -1.0 + 0.8 * 2.8, 0.5 + 0.8 * 1.24, 2.0]
    assert out[1, 0] == pytest.approx(1.0 / _std_with_prior(returns), rel=1e-4)
