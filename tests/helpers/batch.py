"""The contract of a native batch (hdppo.sims.NumpyBatch): E copies stepped together equal E single
copies with the same seeds, step for step, resets included."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


def assert_copies_match(make: Callable[[int, int], object], n_envs: int, steps: int,
                        act: Callable[[object, np.random.Generator], np.ndarray], seed: int = 11) -> int:
    """Step make(n_envs, seed) and make(1, seed + e) for each e with the same actions (act(big, rng));
    assert equal step results, observations, alive flags, masks, states and episode infos, spaces and
    dtypes. Returns the number of episodes that ended."""
    big = make(n_envs, seed)
    small = [make(1, seed + e) for e in range(n_envs)]
    big.reset(seed=seed)
    for e, env in enumerate(small):
        env.reset(seed=seed + e)
    rng = np.random.default_rng(0)
    n_done = 0
    for _ in range(steps):
        actions = act(big, rng)
        out = big.step(actions)
        outs = [env.step(actions[e:e + 1]) for e, env in enumerate(small)]
        for field in ("rewards", "terminated", "truncated", "done"):
            np.testing.assert_array_equal(getattr(out, field), np.concatenate([getattr(o, field) for o in outs]))
        for name in ("obs", "alive", "action_mask"):
            if getattr(big, name) is not None:
                np.testing.assert_array_equal(getattr(big, name), np.concatenate([getattr(s, name) for s in small]))
        np.testing.assert_array_equal(big.state(), np.concatenate([s.state() for s in small]))
        assert big.obs.dtype == np.float32 and out.rewards.dtype == np.float32
        for e in np.flatnonzero(out.done):
            assert big.episode_info(int(e)) == small[e].episode_info(0)
        n_done += int(out.done.sum())
        big.reset_done(out.done)
        for e, env in enumerate(small):
            env.reset_done(out.done[e:e + 1])
        assert all(big.obs_space.contains(o) for o in big.obs.reshape(-1, big.obs.shape[-1]))
        assert all(big.state_space.contains(s) for s in big.state())
    return n_done
