"""SpreadBatch: MPE2 simple_spread vectorised over copies; it must match mpe2 step by step."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import hdppo.scenarios.spread.sim as spread_batch
from hdppo.scenarios.spread.sim import SpreadBatch
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario

ATOL = 1e-5


def mpe2_env(n: int, local_ratio: float = 0.5, max_cycles: int = 25):
    from mpe2 import simple_spread_v3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simple_spread_v3.parallel_env(N=n, local_ratio=local_ratio, max_cycles=max_cycles,
                                             continuous_actions=False)


def stack(d: dict, agents: list[str]) -> np.ndarray:
    return np.stack([np.asarray(d[a]) for a in agents])


def world_state(env) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = env.unwrapped.world
    return (np.array([a.state.p_pos for a in w.agents]), np.array([a.state.p_vel for a in w.agents]),
            np.array([lm.state.p_pos for lm in w.landmarks]))


def rollout(env: SpreadBatch, actions: np.ndarray) -> list[tuple]:
    out = []
    for a in actions:
        r = env.step(a)
        out.append((env.obs.copy(), env.state(), r.rewards, r.terminated, r.truncated, r.done))
        env.reset_done(r.done)
        out.append((env.obs.copy(),))
    return out


# ---- spaces and names ----------------------------------------------------------------------------
def test_module_is_not_a_scenario_and_spaces_match_mpe2() -> None:
    assert not hasattr(spread_batch, "SCENARIO")
    for n in (3, 6):
        ref = mpe2_env(n)
        sb = SpreadBatch(n, 0.5, 25, 2, seed=0)
        assert sb.units == ref.possible_agents == [f"agent_{i}" for i in range(n)]
        assert sb.obs_space.shape == ref.observation_space("agent_0").shape == (4 + 2 * n + 4 * (n - 1),)
        assert sb.state_space.shape == ref.state_space.shape == (n * sb.obs_dim,)
        assert sb.action_space == ref.action_space("agent_0")
        assert sb.obs.shape == (2, n, sb.obs_dim) and sb.obs.dtype == np.float32
        assert sb.state().shape == (2, n * sb.obs_dim) and sb.alive.all()
        ref.close()


# ---- exactness against mpe2 ----------------------------------------------------------------------
@pytest.mark.parametrize("n, local_ratio, seeds", [(6, 0.5, (0, 1, 2, 3)), (3, 0.5, (0, 1, 2, 3)),
                                                   (3, 0.0, (4,)), (4, 1.0, (5,)), (2, 0.3, (7,))])
def test_steps_match_mpe2(n: int, local_ratio: float, seeds: tuple[int, ...]) -> None:
    """mpe2's world copied into copy 1 of 3; 25 random steps: obs, rewards, flags, state, world agree.

    Odd seeds first crowd mpe2's agents near the origin, so contacts and collision penalties happen.
    """
    collisions = 0
    for seed in seeds:
        ref = mpe2_env(n, local_ratio)
        ref.reset(seed=seed)
        agents = ref.possible_agents
        if seed % 2:
            for a in ref.unwrapped.world.agents:
                a.state.p_pos *= 0.15
        sb = SpreadBatch(n, local_ratio, 25, 3, seed=100 + seed)
        pos, vel, lm = world_state(ref)
        sb.set_state(1, pos, vel, lm)
        np.testing.assert_allclose(sb.obs[1], stack({a: ref.unwrapped.observe(a) for a in agents}, agents),
                                   atol=ATOL, rtol=0)
        rng = np.random.default_rng(seed)
        for t in range(25):
            acts = rng.integers(5, size=(3, n))
            obs, rew, term, trunc, _ = ref.step({a: int(acts[1, i]) for i, a in enumerate(agents)})
            res = sb.step(acts)
            np.testing.assert_allclose(sb.obs[1], stack(obs, agents), atol=ATOL, rtol=0, err_msg=f"obs t={t}")
            np.testing.assert_allclose(res.rewards[1], stack(rew, agents), atol=ATOL, rtol=0, err_msg=f"rew t={t}")
            np.testing.assert_array_equal(res.truncated[1], stack(trunc, agents))
            np.testing.assert_array_equal(res.terminated[1], stack(term, agents))
            np.testing.assert_allclose(sb.state()[1], ref.state(), atol=ATOL, rtol=0)
            for mine, theirs in zip((sb.pos[1], sb.vel[1], sb.landmarks[1]), world_state(ref)):
                np.testing.assert_allclose(mine, theirs, atol=ATOL, rtol=0)
            p = world_state(ref)[0]
            d = np.linalg.norm(p[:, None] - p[None], axis=-1) + 9 * np.eye(n)
            collisions += int((d < 0.3).any())
            assert bool(res.done[1]) == (t == 24) == (not ref.agents)
            assert sb.alive[1].all() == (t < 24)
        ref.close()
    if len(seeds) > 1 or seeds[0] % 2:
        assert collisions > 0          # the collision penalty and contact forces were exercised


def test_seeded_resets_reproduce_mpe2_initial_states() -> None:
    """Copy e draws like mpe2 seeded with seed + e, and later episodes like its unseeded reset()."""
    n, seed, E = 6, 11, 3
    sb = SpreadBatch(n, 0.5, 5, E, seed=seed)
    refs = [mpe2_env(n, max_cycles=5) for _ in range(E)]
    first = [ref.reset(seed=seed + e)[0] for e, ref in enumerate(refs)]
    for e, ref in enumerate(refs):
        np.testing.assert_array_equal(sb.obs[e], stack(first[e], ref.possible_agents))
    for _ in range(5):
        sb.step(np.zeros((E, n), np.int64))
    sb.reset_done(np.ones(E, bool))
    for e, ref in enumerate(refs):
        np.testing.assert_array_equal(sb.obs[e], stack(ref.reset()[0], ref.possible_agents))
        np.testing.assert_array_equal(sb.vel[e], 0.0)
    sb.reset(seed=seed)
    for e, ref in enumerate(refs):
        np.testing.assert_array_equal(sb.obs[e], stack(first[e], ref.possible_agents))
        ref.close()


# ---- batching, resets, seeding -------------------------------------------------------------------
def test_batched_copies_equal_single_copies() -> None:
    n, E, seed = 6, 4, 7
    actions = np.random.default_rng(0).integers(5, size=(30, E, n))
    batched = rollout(SpreadBatch(n, 0.5, 12, E, seed=seed), actions)
    singles = [rollout(SpreadBatch(n, 0.5, 12, 1, seed=seed + e), actions[:, e:e + 1]) for e in range(E)]
    for k, row in enumerate(batched):
        for e in range(E):
            for mine, single in zip(row, singles[e][k]):
                np.testing.assert_array_equal(mine[e], single[0])


def test_reset_done_resets_only_masked_copies() -> None:
    n, E, seed = 3, 4, 21
    sb = SpreadBatch(n, 0.5, 25, E, seed=seed)
    rng = np.random.default_rng(1)
    for _ in range(6):
        sb.step(rng.integers(5, size=(E, n)))
    before = (sb.obs.copy(), sb.pos.copy(), sb.vel.copy(), sb.landmarks.copy(), sb.t.copy())
    mask = np.array([True, False, True, False])
    sb.reset_done(mask)
    after = (sb.obs, sb.pos, sb.vel, sb.landmarks, sb.t)
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a[~mask], b[~mask])
    assert (sb.t[mask] == 0).all() and (sb.vel[mask] == 0).all() and sb.alive.all()
    assert not np.allclose(sb.landmarks[mask], before[3][mask])
    for e in np.flatnonzero(mask):         # the second episode of copy e's own stream
        single = SpreadBatch(n, 0.5, 25, 1, seed=seed + e)
        single.reset_done(np.ones(1, bool))
        np.testing.assert_array_equal(sb.obs[e], single.obs[0])
    sb.reset_done(np.zeros(E, bool))       # an empty mask changes nothing
    np.testing.assert_array_equal(sb.obs, after[0])


def test_seeding_is_deterministic() -> None:
    n, E = 6, 3
    actions = np.random.default_rng(2).integers(5, size=(30, E, n))

    def run(seed):
        return rollout(SpreadBatch(n, 0.5, 10, E, seed=seed), actions)

    for x, y in zip(run(5), run(5)):
        for a, b in zip(x, y):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(run(5)[0][0], run(6)[0][0])
    a, b = SpreadBatch(n, 0.5, 10, E, seed=None), SpreadBatch(n, 0.5, 10, E, seed=None)
    assert not np.array_equal(a.obs, b.obs)                       # unseeded copies differ
    assert not np.array_equal(a.obs[0], a.obs[1])
    a.reset(seed=5)
    np.testing.assert_array_equal(a.obs, SpreadBatch(n, 0.5, 10, E, seed=5).obs)


# ---- episode ends and contract details -----------------------------------------------------------
def test_truncation_ends_copies_which_then_stay_still() -> None:
    n, E = 3, 2
    sb = SpreadBatch(n, 0.5, 4, E, seed=0)
    for t in range(4):
        res = sb.step(np.full((E, n), 2))
        assert res.truncated.all() == (t == 3) and not res.terminated.any()
        assert res.done.all() == (t == 3)
    info = sb.episode_info(0)
    assert set(info) == {"landmarks_covered", "success", "min_dist_sum", "collisions"}
    assert 0.0 <= info["landmarks_covered"] <= 1.0 and info["min_dist_sum"] > 0
    obs, pos = sb.obs.copy(), sb.pos.copy()
    res = sb.step(np.full((E, n), 9))      # dead units' (even invalid) actions are ignored
    assert not res.truncated.any() and (res.rewards == 0).all() and res.done.all()
    np.testing.assert_array_equal(sb.obs, obs)
    np.testing.assert_array_equal(sb.pos, pos)
    sb.reset_done(np.array([True, False]))
    res = sb.step(np.zeros((E, n), np.int64))
    assert not res.done[0] and res.done[1] and (res.rewards[1] == 0).all() and (res.rewards[0] != 0).all()


def test_bad_actions_and_arguments_are_refused() -> None:
    sb = SpreadBatch(3, 0.5, 25, 2, seed=0)
    with pytest.raises(ValueError):
        sb.step(np.full((2, 3), 5))
    with pytest.raises(ValueError):
        sb.step(np.zeros((2, 4), np.int64))
    sb.step(np.zeros((2, 3, 1), np.int64))          # [E, U, 1] is accepted
    with pytest.raises(ValueError):
        SpreadBatch(3, 1.5, 25, 2, seed=0)
    with pytest.raises(ValueError):
        sb.set_state(0, np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), t=25)


def test_collision_penalty_and_contact_force_by_hand() -> None:
    """Two agents 0.2 apart (< 0.3): each pays 1 (x local_ratio) and they are pushed apart."""
    sb = SpreadBatch(2, 1.0, 25, 1, seed=0)
    sb.set_state(0, [[0.0, 0.0], [0.2, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [-1.0, -1.0]])
    res = sb.step(np.zeros((1, 2), np.int64))
    np.testing.assert_allclose(res.rewards[0], [-1.0, -1.0])
    # penetration ~ 0.1, force ~ 100 * 0.1 = 10 along x, dv = force * dt
    np.testing.assert_allclose(sb.vel[0], [[-1.0, 0.0], [1.0, 0.0]], atol=1e-3)
    np.testing.assert_array_equal(sb.obs[0, :, -2:], 0.0)     # silent agents: comm channel is zeros


# ---- inside the hierarchy: native == PettingZoo adapter ------------------------------------------
def test_hierarchy_native_equals_pettingzoo_adapter() -> None:
    """With equal seeds the native env and mpe2 copies give the same rewards, across episode ends."""
    base = load_scenario("spread")
    native = dataclasses.replace(base, batched_env=lambda cfg, n, seed: SpreadBatch(
        cfg.n_agents, cfg.local_ratio, cfg.max_cycles, n, seed))
    adapter = dataclasses.replace(base, batched_env=None)          # copies of mpe2 behind PettingZooBatch
    cfg = base.make_config({"max_cycles": "10"})
    runs = []
    for scenario in (native, adapter):
        env = HierarchyEnv(scenario, cfg, n_envs=2, seed=3)
        pols = [uniform_policy(info, seed=i) for i, info in enumerate(env.info)]
        runs.append([env.step(lambda d: pols[d.layer](d)) for _ in range(25)])
        env.close()
    for mine, theirs in zip(*runs):
        np.testing.assert_allclose(mine.env_rewards, theirs.env_rewards, atol=ATOL, rtol=0)
        np.testing.assert_array_equal(mine.done, theirs.done)
        for a, b in zip(mine.layers, theirs.layers):
            np.testing.assert_allclose(a.reward, b.reward, atol=1e-4, rtol=0)
    assert sum(int(r.done.sum()) for r in runs[0]) == 4
