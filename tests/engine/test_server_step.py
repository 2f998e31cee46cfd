"""The parameter server's gradients-mode step is torch's own: the gradients' weighted mean, clipped
by `clip_grad_norm_`, stepped by a fused Adam, bit for bit, whatever buffers the server keeps."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from hdppo.engine.messages import GradResult
from tests.helpers.engine import grid_server


def _reference_steps(server, grads_per_step, weights, max_norm):
    """The same steps on a copy of the server's policy with plain torch: per parameter .grad, the
    standard clip and a fused Adam with the server's settings."""
    policy = copy.deepcopy(server.policy)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=server.lc.lr, eps=1e-5, fused=True)
    for grads in grads_per_step:
        agg = np.zeros_like(grads[0], dtype=np.float64)
        for w, g in zip(weights, grads):
            agg += np.float64(w) * g.astype(np.float64)
        flat = torch.as_tensor(agg.astype(np.float32))
        i = 0
        for p in policy.parameters():
            if p.requires_grad:
                p.grad = flat[i:i + p.numel()].view_as(p).clone()
            i += p.numel()
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return torch.nn.utils.parameters_to_vector(policy.parameters()).detach().numpy()


def _steps(server, n_steps, seed, scale):
    rng = np.random.default_rng(seed)
    return [[(scale * rng.normal(size=server.n_params)).astype(np.float32) for _ in range(2)] for _ in range(n_steps)]


def test_sync_steps_equal_torchs_clip_and_adam_bit_for_bit():
    for scale, max_norm in ((1.0, "0.5"), (1e-3, "1e9")):       # the clip active, and never reached
        s = grid_server({"max_grad_norm": max_norm})
        steps = _steps(s, 5, seed=1, scale=scale)
        want = _reference_steps(s, steps, [0.25, 0.75], float(max_norm))
        for grads in steps:
            out = s.apply([GradResult("low", 0, s.version, 10, grads[0], {}),
                           GradResult("low", 1, s.version, 30, grads[1], {})])
            assert out["grad_norm"] > 0
        np.testing.assert_array_equal(s.params(), want)
        assert all(p.grad is None for p in s.policy.parameters())   # no gradient outlives its step


def test_async_steps_and_value_norm_statistics_keep_their_places_in_the_flat_vector():
    s = grid_server({"value_norm": "true"})
    frozen = [name for name, p in s.policy.named_parameters() if not p.requires_grad]
    assert frozen                                   # value_norm's statistics are untrained parameters
    s.observe_returns([(100, 3.0, 4.0)])
    stats = [float(s.policy.value_mean), float(s.policy.value_std)]
    steps = _steps(s, 3, seed=2, scale=0.1)
    want = _reference_steps(s, [[g[0]] for g in steps], [1.0], s.lc.max_grad_norm)
    for grads in steps:
        assert s.apply_async(GradResult("low", 0, s.version, 10, grads[0], {}))
    np.testing.assert_array_equal(s.params(), want)
    assert [float(s.policy.value_mean), float(s.policy.value_std)] == stats


def test_cosines_and_loss_terms_of_a_step_are_reported_per_worker():
    s = grid_server()
    g = np.ones(s.n_params, np.float32)
    assert s.n_params % 2 == 0
    h = np.where(np.arange(s.n_params) % 2 == 0, 1.0, -1.0).astype(np.float32)    # orthogonal to g
    out = s.apply([GradResult("low", 3, 0, 10, g, {"pg_loss": 1.0}),
                   GradResult("low", 5, 0, 30, 3 * g, {"pg_loss": 3.0}),
                   GradResult("low", 7, 0, 0, None, {})])           # a worker with no rows takes no part
    assert out["per_worker_cosine"] == pytest.approx({3: 1.0, 5: 1.0})
    assert out["grad_cosine_min"] == pytest.approx(1.0) and out["pg_loss"] == 2.5
    out = s.apply([GradResult("low", 3, 1, 10, g, {"pg_loss": 1.0}), GradResult("low", 5, 1, 10, -g, {"pg_loss": 3.0})])
    assert set(out["per_worker_cosine"]) == {3, 5} and all(np.isnan(c) for c in out["per_worker_cosine"].values())
    assert np.isnan(out["grad_cosine_mean"]) and out["pg_loss"] == 2.0      # a zero aggregate has no direction
    out = s.apply([GradResult("low", 3, 2, 10, g, {}), GradResult("low", 5, 2, 10, h, {})])
    assert out["per_worker_cosine"] == pytest.approx({3: 2 ** -0.5, 5: 2 ** -0.5})
