"""Where a rollout ends: transitions that closed on its last step bootstrap from the value of their
slot's next decision state (as flat PPO uses V(next obs)), and a time limit bootstraps from the state
the layer would have decided in, not from "everyone dead"."""
from __future__ import annotations

import numpy as np
import torch

from hdppo.engine.config import resolve_overrides, train_config_to_dict
from hdppo.engine.params import MemoryParams
from hdppo.engine.worker import Worker, WorkerSpec
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario

GAMMA, LAM = 0.99, 0.95


def make_worker(scenario: dict, trained: list[str], envs: int, **train) -> Worker:
    sc = load_scenario("grid")
    names = [s.name for s in sc.build_layers(sc.make_config(scenario))]
    over = {"envs_per_worker": str(envs), "reward_norm": "false", "progress": "false", "gae_lambda": str(LAM)}
    over.update({k: str(v) for k, v in train.items()})
    tc, _ = resolve_overrides(over, names, set())
    return Worker(WorkerSpec("grid", scenario, train_config_to_dict(tc), 0, trained), MemoryParams())


def textbook_gae(rewards, values, discounts, last_value, lam):
    """CleanRL's recursion with discount_t = gamma * (1 - done_t)."""
    adv, last = np.zeros(len(rewards)), 0.0
    for t in reversed(range(len(rewards))):
        next_v = last_value if t == len(rewards) - 1 else values[t + 1]
        last = rewards[t] + discounts[t] * next_v - values[t] + discounts[t] * lam * last
        adv[t] = last
    return adv


def record_steps(w: Worker) -> list:
    """Every StepResult the worker records, in order."""
    seen = []
    original = w._record

    def spy(result):
        seen.append(result)
        original(result)
    w._record = spy
    return seen


def value_of(w: Worker, layer: str, obs: np.ndarray) -> np.ndarray:
    """V of decision observations [E, S, D] as the worker computes it (centralized critic included)."""
    from hdppo.engine.learner import critic_obs
    i = w.by_name[layer].info.index
    crit = critic_obs(obs, w.hier.slot_alive(i)) if w.by_name[layer].lc.centralized else None
    flat = lambda x: torch.as_tensor(x.reshape(-1, x.shape[-1]), dtype=torch.float32)  # noqa: E731
    with torch.no_grad():
        v = w.by_name[layer].policy.value(flat(obs), critic_obs=None if crit is None else flat(crit))
    return v.numpy().reshape(obs.shape[:2])


def test_flat_rollout_advantages_equal_textbook_gae_with_next_value():
    """One copy, a flat team, no episode end inside the rollout: SMDP-GAE must equal CleanRL's GAE
    with last_value = V(obs after the rollout). Before the fix the last step used V = 0."""
    R = 12
    w = make_worker({"layers": 1, "max_steps": 100}, ["low"], envs=1, rollout=R)
    steps = record_steps(w)
    res = w.collect()
    assert res.due == ["low"] and len(steps) == R
    batch = w.by_name["low"].batch
    U = len(w.hier.info[0].slot_names)
    assert len(batch) == R * U
    next_v = value_of(w, "low", w.hier.decision_obs(0))[0]      # V(obs after the rollout)
    for u in range(U):
        rewards = np.array([s.layers[0].reward[0, u] for s in steps])
        discounts = np.array([s.layers[0].discount[0, u] for s in steps])
        assert np.all(discounts == np.float32(GAMMA))
        values = batch.values[u::U]
        expected = textbook_gae(rewards, values, discounts, next_v[u], LAM)
        np.testing.assert_allclose(batch.advantages[u::U], expected, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(batch.returns[u::U], expected + values, rtol=1e-4, atol=1e-5)


def test_upper_layer_in_step_with_the_rollout_bootstraps_from_its_next_decision():
    """3 layers, mid (interval 4) trained, rollout of 2 mid decisions = 8 env steps: the mid
    transitions closing on the rollout's last step have returns r + gamma^4 * V(next mid decision)."""
    w = make_worker({}, ["mid"], envs=4, rollout=8)
    steps = record_steps(w)
    w.collect()
    assert len(steps) == 8
    batch = w.by_name["mid"].batch
    last = steps[-1].layers[1]
    going_on = last.closed & (last.discount > 0)      # copies whose episode did not end in the rollout
    assert going_on.sum() >= 8 and np.allclose(last.discount[going_on], GAMMA ** 4)
    obs = w.hier.decision_obs(1)        # the next mid decision's input (goals from high included)
    E, S, D = obs.shape
    next_v = value_of(w, "mid", obs)
    # the batch is ordered (decision row, copy, slot); every copy decided at step 4, so the last E*S
    # transitions are that row, and those still going on closed on the rollout's last step
    returns = batch.returns[-E * S:].reshape(E, S)
    expected = last.reward + last.discount * next_v
    np.testing.assert_allclose(returns[going_on], expected[going_on], rtol=1e-4, atol=1e-5)


def test_time_limit_final_obs_counts_truncated_units_alive():
    """At a time limit every unit is truncated; the upper layers' final observation must be built
    over those units (fraction alive 1, mean of their final observations), not over no unit."""
    sc = load_scenario("grid")
    cfg = sc.make_config({"max_steps": 4})
    hier = HierarchyEnv(sc, cfg, n_envs=2, seed=0, autoreset=False)
    rng = np.random.default_rng(0)

    def act(d):
        space = hier.info[d.layer].action_space
        return rng.integers(0, space.n, size=d.obs.shape[:2])
    for _ in range(3):
        result = hier.step(act)
        assert not result.done.any()
    result = hier.step(act)
    assert result.done.all()
    unit_obs = hier.env.obs                       # final observations of the truncated units
    Du = unit_obs.shape[2]
    mid = hier.info[1]
    step = result.layers[1]
    assert step.truncated.all() and step.final_obs is not None
    idx = hier.idx[1]                              # [E, squads, units per squad]
    C = idx.shape[2]
    own = step.final_obs.reshape(2, len(mid.nodes), C, -1)[:, :, 0, :]     # a squad's own part
    for e in range(2):
        for n in range(len(mid.nodes)):
            members = unit_obs[e, idx[e, n]]
            np.testing.assert_allclose(own[e, n, :Du], members.mean(axis=0), rtol=1e-6)
            np.testing.assert_allclose(own[e, n, Du:2 * Du], members.max(axis=0), rtol=1e-6)
            assert own[e, n, 2 * Du] == 1.0           # every child alive at the time limit
    high = result.layers[0]
    assert high.truncated.all()
    assert np.abs(high.final_obs).sum() > 0
