"""Action heads, ActorCritic and the policy factory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from hdppo.policies import (
    POLICIES,
    ActorCritic,
    BoxHead,
    DiscreteHead,
    MultiDiscreteHead,
    PolicySpec,
    make_head,
    make_policy,
)

B, F = 6, 5


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _feat(b: int = B) -> torch.Tensor:
    return torch.randn(b, F)


# ---------------------------------------------------------------- heads


@pytest.mark.parametrize(
    "space, shape, dtype",
    [
        (spaces.Discrete(4), (B,), torch.int64),
        (spaces.MultiDiscrete([3, 2, 5]), (B, 3), torch.int64),
        (spaces.Box(-1, 1, (3,)), (B, 3), torch.float32),
        (spaces.Box(-1, 1, (2, 2)), (B, 4), torch.float32),
    ],
)
def test_head_shapes(space, shape, dtype):
    head = make_head(F, space)
    assert (B,) + head.action_shape == shape and head.action_dtype == dtype
    d = head.dist(_feat())
    for a in (d.sample(), d.mode()):
        assert a.shape == shape and a.dtype == dtype
        assert d.log_prob(a).shape == (B,)
    assert d.entropy().shape == (B,)


def test_unsupported_space_raises():
    with pytest.raises(ValueError, match="unsupported action space"):
        make_head(F, spaces.MultiBinary(3))


def test_masked_discrete_never_samples_masked():
    head = DiscreteHead(F, 5)
    with torch.no_grad():
        head.linear.weight.mul_(300.0)  # sharp logits, so the mask really matters
    feats = _feat(64)
    mask = torch.rand(64, 5) < 0.5
    mask[torch.arange(64), torch.randint(0, 5, (64,))] = True
    d = head.dist(feats, mask)
    for _ in range(50):
        a = d.sample()
        assert bool(mask[torch.arange(64), a].all())
    assert bool(mask[torch.arange(64), d.mode()].all())
    masked_a = torch.nonzero(~mask)
    if len(masked_a):
        row, col = masked_a[0]
        lp = head.dist(feats[row : row + 1], mask[row : row + 1]).log_prob(col.view(1))
        assert float(lp.detach()) < -1e6 and math.isfinite(float(lp.detach()))


def test_masked_entropy_finite_and_over_allowed_only():
    head = DiscreteHead(F, 4)
    with torch.no_grad():
        head.linear.weight.zero_()  # uniform logits
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    ent = head.dist(_feat(4), mask).entropy()
    assert torch.isfinite(ent).all()
    torch.testing.assert_close(ent, torch.tensor([math.log(2), 0.0, math.log(4), math.log(4)]))
    # gradients through masked entropy and log_prob stay finite
    feats = _feat(4).requires_grad_(True)
    d = head.dist(feats, mask)
    (d.entropy().sum() + d.log_prob(torch.zeros(4, dtype=torch.int64)).sum()).backward()
    assert torch.isfinite(feats.grad).all()


def test_multidiscrete_masks_per_dimension():
    nvec = (3, 4)
    head = MultiDiscreteHead(F, nvec)
    mask = torch.zeros(200, 7, dtype=torch.bool)
    mask[:, 1] = True  # dim 0: only action 1
    mask[:, 3 + 0] = mask[:, 3 + 2] = True  # dim 1: actions 0 or 2
    d = head.dist(torch.randn(200, F), mask)
    a = d.sample()
    assert bool((a[:, 0] == 1).all())
    assert set(a[:, 1].tolist()) <= {0, 2} and set(a[:, 1].tolist()) == {0, 2}
    ent = d.entropy()
    assert torch.isfinite(ent).all() and bool((ent <= math.log(2) + 1e-5).all())
    bad = torch.tensor([[0, 0]] * 200)
    assert bool((d.log_prob(bad) < -1e6).all())
    with pytest.raises(ValueError, match="mask"):
        head.dist(torch.randn(2, F), torch.ones(2, 6, dtype=torch.bool))


def test_multidiscrete_logp_is_sum_of_parts():
    head = MultiDiscreteHead(F, (3, 4))
    feats = _feat()
    d = head.dist(feats)
    a = d.sample()
    logits = head.linear(feats)
    ref = torch.distributions.Categorical(logits=logits[:, :3]).log_prob(a[:, 0])
    ref = ref + torch.distributions.Categorical(logits=logits[:, 3:]).log_prob(a[:, 1])
    torch.testing.assert_close(d.log_prob(a), ref)


def test_box_logp_matches_torch_normal():
    head = BoxHead(F, 3, log_std_init=-0.3)
    feats = _feat()
    d = head.dist(feats)
    a = d.sample()
    ref = torch.distributions.Normal(head.mean(feats), torch.full((3,), -0.3).exp())
    torch.testing.assert_close(d.log_prob(a), ref.log_prob(a).sum(-1))
    torch.testing.assert_close(d.entropy(), ref.entropy().sum(-1))
    torch.testing.assert_close(d.mode(), head.mean(feats))
    assert torch.allclose(head.log_std, torch.full((3,), -0.3))
    assert isinstance(head.log_std, torch.nn.Parameter)


# ---------------------------------------------------------------- ActorCritic


SPACES = [spaces.Discrete(4), spaces.MultiDiscrete([2, 3]), spaces.Box(-1, 1, (2, 2))]


def _mask_for(space, b: int) -> torch.Tensor | None:
    """A random action mask that leaves at least one action per (sub-)action allowed; None for Box."""
    if isinstance(space, spaces.Discrete):
        sizes = [int(space.n)]
    elif isinstance(space, spaces.MultiDiscrete):
        sizes = [int(n) for n in space.nvec]
    else:
        return None
    parts = []
    for n in sizes:
        m = torch.rand(b, n) < 0.5
        m[torch.arange(b), torch.randint(0, n, (b,))] = True
        parts.append(m)
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("roles,centralized", [(False, False), (True, True)])
def test_evaluate_reproduces_act(space, roles, centralized):
    """PPO's ratio starts at 1: evaluate() gives back the log-prob and value that act() recorded
    for sampled (not greedy) actions, with masks, roles and a centralized critic."""
    b = 64
    pol = ActorCritic(7, space, n_roles=3 if roles else 0, critic_obs_dim=11 if centralized else None)
    with torch.no_grad():
        for p in pol.head.parameters():
            if p.dim() == 2:
                p.mul_(200.0)          # sharp distributions, so masks and roles change the numbers
    obs = torch.randn(b, 7)
    mask = _mask_for(space, b)
    kw = {}
    if roles:
        kw["roles"] = torch.arange(b) % 3
    cobs = {"critic_obs": torch.randn(b, 11)} if centralized else {}
    action, logp, value = pol.act(obs, mask=mask, **kw, **cobs)
    assert logp.shape == (b,) and value.shape == (b,) and not logp.requires_grad
    greedy, _, _ = pol.act(obs, mask=mask, **kw, **cobs, deterministic=True)
    assert not torch.equal(action, greedy), "act() did not sample"
    if mask is not None and isinstance(space, spaces.Discrete):
        assert bool(mask[torch.arange(b), action].all())
    new_logp, ent, new_value = pol.evaluate(obs, action, mask=mask, **kw, **cobs)
    torch.testing.assert_close(new_logp, logp)
    torch.testing.assert_close(new_value, value)
    assert ent.shape == (b,) and new_logp.requires_grad and new_value.requires_grad
    torch.testing.assert_close(pol.value(obs, **kw, **cobs), value)
    if isinstance(space, spaces.Box):
        # the env-shaped (unflattened) action gives the same log-prob
        torch.testing.assert_close(pol.evaluate(obs, action.reshape((b,) + space.shape), **kw, **cobs)[0], logp)
    # and evaluate() really scores the given actions: other actions get other log-probs
    other = greedy if isinstance(space, spaces.Box) else torch.roll(action, 1, dims=0)
    assert not torch.allclose(pol.evaluate(obs, other, mask=mask, **kw, **cobs)[0], logp)


def test_act_accepts_numpy_and_mask():
    pol = ActorCritic(3, spaces.Discrete(3))
    mask = np.array([[False, True, False]] * 4)
    a, logp, _ = pol.act(np.zeros((4, 3), dtype=np.float64), mask=mask)
    assert a.tolist() == [1, 1, 1, 1]
    torch.testing.assert_close(logp, torch.zeros(4), atol=1e-5, rtol=0)


def test_role_embedding_changes_output():
    pol = ActorCritic(4, spaces.Discrete(3), n_roles=3)
    obs = torch.randn(1, 4).repeat(3, 1)
    roles = torch.tensor([0, 1, 2])
    logits = pol.distribution(obs, roles=roles).logits
    assert not torch.allclose(logits[0], logits[1]) and not torch.allclose(logits[1], logits[2])
    v = pol.value(obs, roles=roles)
    assert not torch.allclose(v[0], v[1])
    with pytest.raises(ValueError, match="roles"):
        pol.act(obs)
    with pytest.raises(ValueError, match="roles"):
        ActorCritic(4, spaces.Discrete(3)).act(obs, roles=roles)


def test_centralized_critic_reads_critic_obs():
    pol = ActorCritic(4, spaces.Discrete(3), critic_obs_dim=9)
    obs, cobs = torch.randn(B, 4), torch.randn(B, 9)
    v = pol.value(obs, critic_obs=cobs)
    torch.testing.assert_close(pol.value(torch.randn(B, 4), critic_obs=cobs), v)
    assert not torch.allclose(pol.value(obs, critic_obs=torch.randn(B, 9)), v)
    _, _, v_act = pol.act(obs, critic_obs=cobs)
    torch.testing.assert_close(v_act, v)
    with pytest.raises(ValueError, match="critic_obs"):
        pol.value(obs)
    with pytest.raises(ValueError, match="critic_obs"):
        ActorCritic(4, spaces.Discrete(3)).value(obs, critic_obs=cobs)


@torch.no_grad()
def test_init_scales():
    pol = ActorCritic(10, spaces.Discrete(5), hidden=(32,))
    w = pol.head.linear.weight
    assert float(w.norm(dim=1).max()) <= 0.011  # orthogonal rows with gain 0.01
    assert float(pol.value_out.weight.norm()) == pytest.approx(1.0, rel=1e-4)
    svals = torch.linalg.svdvals(pol.actor_body[0].weight)
    torch.testing.assert_close(svals, torch.full_like(svals, math.sqrt(2)))


def test_gradients_reach_actor_and_critic():
    torch.manual_seed(1)
    pol = ActorCritic(3, spaces.Discrete(2), hidden=(16,), n_roles=2)
    opt = torch.optim.Adam(pol.parameters(), lr=0.05)
    obs = torch.randn(32, 3)
    roles = torch.randint(0, 2, (32,))
    target_a = (obs[:, 0] > 0).long()
    target_v = obs.sum(-1)
    first = None
    for _ in range(60):
        logp, _, v = pol.evaluate(obs, target_a, roles=roles)
        loss = -logp.mean() + ((v - target_v) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if first is None:
            first = loss.item()
            for name, p in pol.named_parameters():
                assert p.grad is not None and torch.any(p.grad != 0), name
        opt.step()
    assert loss.item() < 0.5 * first


def _ppo_steps_on_spread(sign: float, steps: int = 30) -> torch.Tensor:
    """log_std after PPO updates where the advantage is sign * (how far the action fell from the mean)."""
    from hdppo.engine.ppo import ppo_loss
    torch.manual_seed(3)
    pol = ActorCritic(2, spaces.Box(-1, 1, (2,)), hidden=(8,))
    opt = torch.optim.Adam(pol.parameters(), lr=0.02)
    obs = torch.randn(256, 2)
    for _ in range(steps):
        action, old_logp, old_v = pol.act(obs)
        mean = pol.distribution(obs).mode().detach()
        adv = sign * (action - mean).abs().sum(-1)
        for _ in range(2):
            logp, ent, v = pol.evaluate(obs, action)
            terms = ppo_loss(logp, old_logp, adv, v, old_v, old_v, ent, ent_coef=0.0, vf_coef=0.0)
            opt.zero_grad()
            terms.loss.backward()
            opt.step()
    return pol.head.log_std.detach().clone()


def test_box_policy_log_std_learns():
    """The Gaussian's log_std follows the advantage: wider exploration when far-off actions pay, narrower
    when they cost (entropy bonus off, so only the policy gradient moves it)."""
    start = ActorCritic(2, spaces.Box(-1, 1, (2,)), hidden=(8,)).head.log_std.detach()
    wider = _ppo_steps_on_spread(+1.0)
    narrower = _ppo_steps_on_spread(-1.0)
    assert bool((wider > start + 0.1).all()), (start, wider)
    assert bool((narrower < start - 0.1).all()), (start, narrower)


# ---------------------------------------------------------------- factory


def test_factory_builds_and_validates():
    assert "mlp" in POLICIES
    pol = make_policy(5, spaces.Discrete(2), PolicySpec(hidden=(8, 8), activation="relu"))
    assert isinstance(pol, ActorCritic) and not pol.centralized
    pol = make_policy(5, spaces.Discrete(2), PolicySpec(centralized=True), critic_obs_dim=11)
    assert pol.centralized and pol.critic_obs_dim == 11
    pol = make_policy(5, spaces.Discrete(2), PolicySpec(centralized=True, critic_obs_dim=7))
    assert pol.critic_obs_dim == 7
    with pytest.raises(ValueError, match="critic_obs_dim"):
        make_policy(5, spaces.Discrete(2), PolicySpec(centralized=True))
    with pytest.raises(ValueError, match=r"'transformer'.*mlp"):
        make_policy(5, spaces.Discrete(2), PolicySpec(kind="transformer"))
    with pytest.raises(ValueError, match="activation"):
        make_policy(5, spaces.Discrete(2), PolicySpec(activation="sigmoidish"))
