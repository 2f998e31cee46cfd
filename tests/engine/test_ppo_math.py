"""hdppo.engine.ppo against plain reference loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hdppo.engine.ppo import explained_variance, kl_early_stop, linear_schedule, ppo_loss, smdp_gae

GAMMA, LAM = 0.99, 0.95


# ---------------------------------------------------------------- references


def ref_slot_gae(r, v, d, valid, closed, lam, last_value=None):
    """Per-slot reference: walk the slot's own decision list backwards; the last closed decision
    bootstraps from `last_value`, the value of the slot's next decision after the rollout."""
    T = len(r)
    adv = [0.0] * T
    idx = [t for t in range(T) if valid[t]]
    for j in reversed(range(len(idx))):
        t = idx[j]
        if not closed[t]:
            continue
        if j + 1 < len(idx):
            nt = idx[j + 1]
            next_v = v[nt]
            next_a = adv[nt] if closed[nt] else 0.0
        else:
            if last_value is None:
                assert d[t] == 0, "a continuing transition needs last_value"
            next_v, next_a = (0.0 if last_value is None else last_value), 0.0
        delta = r[t] + d[t] * next_v - v[t]
        adv[t] = delta + d[t] * lam * next_a
    ret = [adv[t] + v[t] if (valid[t] and closed[t]) else 0.0 for t in range(T)]
    return np.array(adv), np.array(ret)


def ref_gae_batched(r, v, d, valid, closed, lam, last_values=None):
    """Apply the per-slot reference to every batch element independently."""
    adv = np.zeros(r.shape)
    ret = np.zeros(r.shape)
    for b in np.ndindex(*r.shape[1:]):
        sl = (slice(None),) + b
        last = None if last_values is None else float(last_values[b])
        a, rt = ref_slot_gae(r[sl], v[sl], d[sl], valid[sl], closed[sl], lam, last)
        adv[sl], ret[sl] = a, rt
    return adv, ret


def textbook_gae(rewards, values, terminals, last_value, gamma, lam):
    """The usual flat recursion; terminals[t] means transition t ended the episode."""
    T = len(rewards)
    adv = np.zeros(T)
    last = 0.0
    for t in reversed(range(T)):
        next_v = last_value if t == T - 1 else values[t + 1]
        nonterm = 1.0 - terminals[t]
        delta = rewards[t] + gamma * next_v * nonterm - values[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv, adv + np.asarray(values)


def _flat_as_smdp(rewards, values, terminals, last_value, gamma):
    """A flat rollout as an SMDP batch: T closed rows plus one open row holding the bootstrap."""
    T = len(rewards)
    r = np.append(rewards, 0.0)
    v = np.append(values, last_value)
    d = np.append(gamma * (1.0 - np.asarray(terminals)), 0.0)
    valid = np.ones(T + 1, bool)
    closed = np.append(np.ones(T, bool), False)
    return r, v, d, valid, closed


# ---------------------------------------------------------------- smdp_gae


def test_hand_computed_three_steps():
    r = np.array([1.0, 2.0, 3.0, 0.0])
    v = np.array([0.5, 1.0, 1.5, 2.0])
    d = np.array([0.9, 0.9, 0.9, 0.0])
    valid = np.ones(4, bool)
    closed = np.array([True, True, True, False])
    adv, ret = smdp_gae(r, v, d, valid, closed, lam=0.8)
    # delta2 = 3 + .9*2 - 1.5 = 3.3 ; delta1 = 2 + .9*1.5 - 1 = 2.35 ; delta0 = 1 + .9*1 - .5 = 1.4
    expected = np.array([1.4 + 0.72 * (2.35 + 0.72 * 3.3), 2.35 + 0.72 * 3.3, 3.3, 0.0])
    np.testing.assert_allclose(adv, expected, rtol=1e-6)
    np.testing.assert_allclose(ret, [4.80272 + 0.5, 4.726 + 1.0, 3.3 + 1.5, 0.0], rtol=1e-6)
    assert adv.dtype == np.float32 and ret.dtype == np.float32


def test_interval_one_equals_textbook():
    rng = np.random.default_rng(0)
    T = 32
    rewards, values = rng.normal(size=T), rng.normal(size=T)
    terminals = np.zeros(T)
    terminals[[7, 20]] = 1.0
    last_value = 0.37
    exp_a, exp_r = textbook_gae(rewards, values, terminals, last_value, GAMMA, LAM)
    adv, ret = smdp_gae(*_flat_as_smdp(rewards, values, terminals, last_value, GAMMA), lam=LAM)
    np.testing.assert_allclose(adv[:T], exp_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret[:T], exp_r, rtol=1e-5, atol=1e-6)
    assert adv[T] == 0.0 and ret[T] == 0.0


def test_interval_four_with_gamma_pow_k():
    rng = np.random.default_rng(1)
    k, n = 4, 6
    T = k * n + 1
    rewards, values = rng.normal(size=n), rng.normal(size=n)
    last_value = -0.5
    g4 = GAMMA**k
    exp_a, exp_r = textbook_gae(rewards, values, np.zeros(n), last_value, g4, LAM)
    r, v, d = np.zeros(T), np.full(T, np.nan), np.zeros(T)
    valid = np.zeros(T, bool)
    closed = np.zeros(T, bool)
    rows = np.arange(n) * k
    r[rows], v[rows], d[rows], valid[rows], closed[rows] = rewards, values, g4, True, True
    v[n * k], valid[n * k] = last_value, True  # open decision: bootstrap only
    adv, ret = smdp_gae(r, v, d, valid, closed, LAM)
    np.testing.assert_allclose(adv[rows], exp_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret[rows], exp_r, rtol=1e-5, atol=1e-6)
    off = np.ones(T, bool)
    off[rows] = False
    assert np.all(adv[off] == 0.0) and np.all(ret[off] == 0.0)
    assert np.all(np.isfinite(adv)) and np.all(np.isfinite(ret))


def test_mixed_intervals_match_reference():
    # one slot with decisions at uneven gaps (an episode ended in the middle of an interval)
    rows = [0, 4, 8, 10, 14]
    T = 16
    g = GAMMA
    r, v, d = np.zeros(T), np.zeros(T), np.zeros(T)
    valid, closed = np.zeros(T, bool), np.zeros(T, bool)
    r[rows] = [1.0, -0.5, 2.0, 0.3, 0.0]
    v[rows] = [0.2, 0.4, -0.1, 0.9, 1.1]
    d[rows] = [g**4, g**4, 0.0, g**4, 0.0]  # row 8: episode ended after 2 steps -> terminal
    valid[rows] = True
    closed[rows] = [True, True, True, True, False]
    adv, ret = smdp_gae(r, v, d, valid, closed, LAM)
    exp_a, exp_r = ref_slot_gae(r, v, d, valid, closed, LAM)
    np.testing.assert_allclose(adv, exp_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret, exp_r, rtol=1e-5, atol=1e-6)
    # explicit: row 10 bootstraps from the open row 14, chain cut there
    assert adv[10] == pytest.approx(0.3 + g**4 * 1.1 - 0.9, rel=1e-6)
    # row 8 is terminal: no bootstrap from row 10
    assert adv[8] == pytest.approx(2.0 - (-0.1), rel=1e-6)


def test_terminal_cuts_across_episodes():
    rng = np.random.default_rng(2)
    T = 10
    r, v = rng.normal(size=T), rng.normal(size=T)
    d = np.full(T, GAMMA)
    d[4] = 0.0
    valid, closed = np.ones(T, bool), np.ones(T, bool)
    adv1, _ = smdp_gae(r, v, d, valid, closed, LAM, last_values=np.array(0.3))
    r2, v2 = r.copy(), v.copy()
    r2[5:] += 100.0
    v2[5:] -= 50.0
    adv2, _ = smdp_gae(r2, v2, d, valid, closed, LAM, last_values=np.array(-7.0))
    np.testing.assert_array_equal(adv1[:5], adv2[:5])
    assert adv1[4] == pytest.approx(r[4] - v[4], rel=1e-6)


def test_truncation_via_reward_bootstrap():
    # episode truncated after 3 env steps of a 4-step interval: caller folds gamma^3 * V(final)
    # into the reward and passes discount 0; the next episode starts at the next decision.
    g, v_final = GAMMA, 0.8
    r_int = 1.5
    r = np.array([0.2, r_int + g**3 * v_final, 0.7, 0.0])
    v = np.array([0.1, 0.3, 0.5, 0.6])
    d = np.array([g**4, 0.0, g**4, 0.0])
    valid = np.ones(4, bool)
    closed = np.array([True, True, True, False])
    adv, ret = smdp_gae(r, v, d, valid, closed, LAM)
    assert adv[1] == pytest.approx(r_int + g**3 * v_final - 0.3, rel=1e-6)
    assert adv[0] == pytest.approx(0.2 + g**4 * 0.3 - 0.1 + g**4 * LAM * adv[1], rel=1e-6)
    assert adv[2] == pytest.approx(0.7 + g**4 * 0.6 - 0.5, rel=1e-6)
    np.testing.assert_allclose(ret[:3], adv[:3] + v[:3], rtol=1e-6)


def test_open_last_transition_is_bootstrap_only():
    r = np.array([1.0, 999.0])
    v = np.array([0.5, 2.0])
    d = np.array([0.9, 999.0])
    valid = np.array([True, True])
    closed = np.array([True, False])
    adv, ret = smdp_gae(r, v, d, valid, closed, lam=0.95)
    assert adv[0] == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)
    assert adv[1] == 0.0 and ret[1] == 0.0


def test_last_closed_without_next_bootstraps_from_last_values():
    """A rollout that ends right after a transition closed: bootstrap from the slot's next value,
    as flat PPO does with the value of the next observation."""
    adv, ret = smdp_gae(np.array([1.0]), np.array([0.5]), np.array([0.9]), np.array([True]),
                        np.array([True]), 0.95, last_values=np.array(2.0))
    assert adv[0] == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)
    assert ret[0] == pytest.approx(1.0 + 0.9 * 2.0)


def test_last_closed_continuing_without_last_values_raises():
    """Bootstrapping a continuing transition from 0 biased every return; it is an error now."""
    with pytest.raises(ValueError, match="last_values"):
        smdp_gae(np.array([1.0]), np.array([0.5]), np.array([0.9]), np.array([True]), np.array([True]), 0.95)


def test_last_closed_terminal_needs_no_last_values():
    adv, ret = smdp_gae(np.array([1.0]), np.array([0.5]), np.array([0.0]), np.array([True]),
                        np.array([True]), 0.95)
    assert adv[0] == pytest.approx(0.5) and ret[0] == pytest.approx(1.0)


def test_garbage_in_unused_entries_is_ignored():
    r = np.array([1.0, np.nan, 2.0, np.inf])
    v = np.array([0.5, np.nan, 1.0, 0.3])
    d = np.array([0.9, -np.inf, 0.9, np.nan])
    valid = np.array([True, False, True, True])
    closed = np.array([True, True, True, False])  # closed without valid is ignored
    with np.errstate(all="raise"):
        adv, ret = smdp_gae(r, v, d, valid, closed, 0.95)
    exp_a, exp_r = ref_slot_gae(np.nan_to_num(r), np.nan_to_num(v), np.nan_to_num(d), valid,
                                closed, 0.95)
    np.testing.assert_allclose(adv, exp_a, rtol=1e-6)
    np.testing.assert_allclose(ret, exp_r, rtol=1e-6)


@pytest.mark.parametrize("shape", [(1,), (7,), (20, 3), (13, 4, 5), (9, 2, 3, 2), (30, 8, 6)])
@pytest.mark.parametrize("seed", range(4))
def test_random_sparse_masks_vs_reference(shape, seed):
    rng = np.random.default_rng(1000 * seed + len(shape))
    r = rng.normal(size=shape)
    v = rng.normal(size=shape)
    d = GAMMA ** rng.integers(1, 5, size=shape) * (rng.random(shape) > 0.15)
    valid = rng.random(shape) < rng.uniform(0.2, 1.0)
    closed = valid.copy()
    # the last valid entry of a slot may be open
    flat_valid = valid.reshape(shape[0], -1)
    flat_closed = closed.reshape(shape[0], -1)
    for b in range(flat_valid.shape[1]):
        ts = np.nonzero(flat_valid[:, b])[0]
        if len(ts) and rng.random() < 0.6:
            flat_closed[ts[-1], b] = False
    lam = float(rng.uniform(0.0, 1.0))
    last = rng.normal(size=shape[1:])
    adv, ret = smdp_gae(r.astype(np.float32), v.astype(np.float32), d.astype(np.float32),
                        valid, closed, lam, last_values=last)
    exp_a, exp_r = ref_gae_batched(r.astype(np.float32), v.astype(np.float32),
                                   d.astype(np.float32), valid, closed, lam, last)
    assert adv.shape == shape and ret.shape == shape
    np.testing.assert_allclose(adv, exp_a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, exp_r, rtol=1e-5, atol=1e-5)


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="values"):
        smdp_gae(np.zeros((3, 2)), np.zeros((3,)), np.zeros((3, 2)), np.ones((3, 2), bool),
                 np.ones((3, 2), bool), 0.9)


# ---------------------------------------------------------------- ppo_loss


def ref_loss(new_lp, old_lp, adv, new_v, old_v, ret, ent, clip_eps, vf_coef, ent_coef,
             clip_vloss, vclip_eps, normalize):
    n = len(new_lp)
    a = list(adv)
    if normalize and n > 1:
        mean = sum(a) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in a) / (n - 1))
        a = [(x - mean) / (std + 1e-8) for x in a]
    pg = kl = cf = vl = 0.0
    for i in range(n):
        ratio = math.exp(new_lp[i] - old_lp[i])
        clipped = min(max(ratio, 1 - clip_eps), 1 + clip_eps)
        pg += max(-a[i] * ratio, -a[i] * clipped) / n
        kl += ((ratio - 1) - (new_lp[i] - old_lp[i])) / n
        cf += (abs(ratio - 1) > clip_eps) / n
        err = (new_v[i] - ret[i]) ** 2
        if clip_vloss:
            vc = old_v[i] + min(max(new_v[i] - old_v[i], -vclip_eps), vclip_eps)
            err = max(err, (vc - ret[i]) ** 2)
        vl += 0.5 * err / n
    e = sum(ent) / n
    return dict(loss=pg + vf_coef * vl - ent_coef * e, pg_loss=pg, v_loss=vl, entropy=e,
                approx_kl=kl, clipfrac=cf)


def _batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(n, generator=g, dtype=torch.float64) - 1.0
    new = old + 0.4 * torch.randn(n, generator=g, dtype=torch.float64)
    return dict(
        new_logp=new, old_logp=old, advantages=torch.randn(n, generator=g, dtype=torch.float64),
        new_values=torch.randn(n, generator=g, dtype=torch.float64),
        old_values=torch.randn(n, generator=g, dtype=torch.float64),
        returns=torch.randn(n, generator=g, dtype=torch.float64),
        entropy=torch.rand(n, generator=g, dtype=torch.float64),
    )


@pytest.mark.parametrize("clip_vloss", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("n", [1, 5, 64])
def test_ppo_loss_terms_match_reference(clip_vloss, normalize, n):
    b = _batch(n, seed=n + 7 * clip_vloss + 3 * normalize)
    kw = dict(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, clip_vloss=clip_vloss, vclip_eps=0.1)
    terms = ppo_loss(**b, **kw, normalize_advantages=normalize)
    exp = ref_loss(*(b[k].tolist() for k in ("new_logp", "old_logp", "advantages", "new_values",
                                             "old_values", "returns", "entropy")),
                   0.2, 0.5, 0.01, clip_vloss, 0.1, normalize)
    got = terms.scalars()
    for name, value in exp.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    for name in ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"):
        assert not getattr(terms, name).requires_grad


def test_vclip_defaults_to_clip_eps():
    b = _batch(16, seed=3)
    a = ppo_loss(**b, clip_vloss=True, clip_eps=0.3).v_loss
    c = ppo_loss(**b, clip_vloss=True, clip_eps=0.3, vclip_eps=0.3).v_loss
    assert float(a) == float(c)


def test_clipped_value_loss_is_max_of_both():
    new_v, old_v, ret = torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([1.0])
    z = torch.zeros(1)
    t = ppo_loss(z, z, z, new_v, old_v, ret, z, clip_vloss=True, vclip_eps=0.2,
                 normalize_advantages=False)
    assert float(t.v_loss) == pytest.approx(0.5 * 0.8**2)  # clipped error is larger
    t = ppo_loss(z, z, z, new_v, old_v, ret, z, clip_vloss=False, normalize_advantages=False)
    assert float(t.v_loss) == 0.0


@pytest.mark.parametrize(
    "logratio, adv, grad_zero",
    [
        (math.log(1.5), 1.0, True),    # above 1+eps, positive advantage: clipped
        (math.log(0.5), -1.0, True),   # below 1-eps, negative advantage: clipped
        (math.log(1.5), -1.0, False),  # above 1+eps, negative advantage: not clipped
        (math.log(0.5), 1.0, False),   # below 1-eps, positive advantage: not clipped
        (math.log(1.1), 1.0, False),   # inside the region
    ],
)
def test_clipping_gradients(logratio, adv, grad_zero):
    old = torch.tensor([-1.0], dtype=torch.float64)
    new = (old + logratio).clone().requires_grad_(True)
    z = torch.zeros(1, dtype=torch.float64)
    t = ppo_loss(new, old, torch.tensor([adv], dtype=torch.float64), z, z, z, z,
                 clip_eps=0.2, normalize_advantages=False, ent_coef=0.0)
    t.loss.backward()
    g = float(new.grad[0])
    if grad_zero:
        assert g == 0.0
    else:
        assert g == pytest.approx(-adv * math.exp(logratio))
    assert float(t.clipfrac) == (1.0 if abs(math.exp(logratio) - 1) > 0.2 else 0.0)


def test_kl_and_clipfrac_zero_when_unchanged():
    b = _batch(32, seed=11)
    b["new_logp"] = b["old_logp"].clone()
    t = ppo_loss(**b)
    assert float(t.approx_kl) == 0.0 and float(t.clipfrac) == 0.0


def test_gradients_reach_values_and_entropy():
    b = _batch(8, seed=5)
    for k in ("new_logp", "new_values", "entropy"):
        b[k] = b[k].clone().requires_grad_(True)
    ppo_loss(**b).loss.backward()
    for k in ("new_logp", "new_values", "entropy"):
        assert b[k].grad is not None and torch.any(b[k].grad != 0)
    assert torch.allclose(b["entropy"].grad, torch.full((8,), -0.01 / 8, dtype=torch.float64))


# ---------------------------------------------------------------- diagnostics, schedules


def test_explained_variance():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y) == pytest.approx(1.0)
    assert explained_variance(np.zeros(4), y) == pytest.approx(0.0)
    assert explained_variance(np.full(4, y.mean()), y) == pytest.approx(0.0)
    pred = y + np.array([0.1, -0.2, 0.3, 0.0])
    exp = 1 - np.var(y - pred) / np.var(y)
    assert explained_variance(torch.tensor(pred), torch.tensor(y)) == pytest.approx(exp)
    assert math.isnan(explained_variance(np.ones(3), np.full(3, 2.0)))


def test_linear_schedule():
    assert linear_schedule(0.01, 0.001, 0.0) == pytest.approx(0.01)
    assert linear_schedule(0.01, 0.001, 1.0) == pytest.approx(0.001)
    assert linear_schedule(0.01, 0.001, 0.5) == pytest.approx(0.0055)
    assert linear_schedule(3e-4, 0.0, -1.0) == pytest.approx(3e-4)
    assert linear_schedule(3e-4, 0.0, 2.0) == pytest.approx(0.0)


@pytest.mark.parametrize("kls, target, stop", [
    ([0.5, 0.5], 0.0, False),            # 0 = off, however far the policy moved
    ([], 1e-9, False),                   # nothing measured (every minibatch empty)
    ([0.01, 0.02], 0.02, False),         # mean 0.015 is under the target
    ([0.01, 0.03], 0.02, False),         # mean 0.02 is not above it
    ([0.01, 0.05], 0.02, True),          # mean 0.03 is
    ([float("nan")], 0.02, False),       # a NaN mean is not a measured drift
])
def test_kl_early_stop_compares_the_epoch_mean(kls, target, stop):
    assert kl_early_stop(kls, target) is stop
