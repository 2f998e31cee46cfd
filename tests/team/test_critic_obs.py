"""hdppo.engine.learner.critic_obs: own obs, then mean and max over the layer's living slots, per env copy."""
from __future__ import annotations

import numpy as np

from hdppo.engine.learner import critic_obs


def test_own_mean_and_max_over_living_slots_by_hand():
    # copy 0: slots 0, 1, 2 alive, slot 3 dead (its huge values must not leak into mean or max)
    # copy 1: only slot 2 alive, and every value it has is negative (the max is not floored at 0)
    obs = np.array([[[1.0, -2.0], [3.0, 4.0], [-5.0, 0.5], [100.0, 100.0]],
                    [[7.0, 7.0], [8.0, 8.0], [-1.0, -3.0], [9.0, 9.0]]], dtype=np.float32)
    alive = np.array([[True, True, True, False],
                      [False, False, True, False]])
    got = critic_obs(obs, alive)
    assert got.shape == (2, 4, 6) and got.dtype == np.float32

    mean0, max0 = [(1 + 3 - 5) / 3, (-2 + 4 + 0.5) / 3], [3.0, 4.0]
    mean1, max1 = [-1.0, -3.0], [-1.0, -3.0]
    for s in range(4):
        # every slot, dead ones too, keeps its own observation in the first D entries
        np.testing.assert_allclose(got[0, s], [*obs[0, s], *mean0, *max0], rtol=1e-6)
        np.testing.assert_allclose(got[1, s], [*obs[1, s], *mean1, *max1], rtol=1e-6)


def test_a_copy_with_every_slot_dead_gets_zeros_not_inf_or_nan():
    obs = np.array([[[2.0, -3.0, 1.0], [4.0, 5.0, -6.0]],
                    [[-2.0, -3.0, -1.0], [-4.0, -5.0, -6.0]]], dtype=np.float32)
    alive = np.array([[True, False], [False, False]])
    got = critic_obs(obs, alive)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[1, :, :3], obs[1])
    np.testing.assert_array_equal(got[1, :, 3:], np.zeros((2, 6), np.float32))
    # the other copy is unaffected: only slot 0 is alive there
    for s in range(2):
        np.testing.assert_array_equal(got[0, s], [*obs[0, s], 2.0, -3.0, 1.0, 2.0, -3.0, 1.0])


def test_matches_a_plain_loop_on_random_arrays():
    rng = np.random.default_rng(0)
    for _ in range(25):
        E, S, D = (int(x) for x in rng.integers(1, 6, size=3))
        obs = rng.normal(size=(E, S, D)).astype(np.float32) - 2.0
        alive = rng.random((E, S)) < 0.5
        got = critic_obs(obs, alive)
        for e in range(E):
            live = [obs[e, s] for s in range(S) if alive[e, s]]
            mean = np.mean(live, axis=0) if live else np.zeros(D)
            mx = np.max(live, axis=0) if live else np.zeros(D)
            for s in range(S):
                np.testing.assert_allclose(got[e, s], np.concatenate([obs[e, s], mean, mx]), rtol=1e-5, atol=1e-6)
