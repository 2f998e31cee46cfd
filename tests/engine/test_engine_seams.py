"""The engine's seams: DPPO modes are classes in `hdppo.engine.modes.MODES`, loss terms are named
entries of `ppo_loss`'s result. A registered mode trains without touching the stage loop or the
backends; a new `loss_*` term reaches the gradient, the server and the layer rows by its name."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hdppo.engine import rows
from hdppo.engine.config import LayerConfig
from hdppo.engine.messages import GradResult
from hdppo.engine.modes import MODES, ExperienceMode, GradientsMode, make_mode
from hdppo.engine.ppo import EpochLoop, ppo_loss
from hdppo.engine.spec import RunSpec
from hdppo.errors import ConfigError
from tests.helpers.engine import OneStepMode, grid_server


# ---- loss terms ----------------------------------------------------------------------------------
def _batch(n: int = 32, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(n, generator=g) - 1.0
    new = (old + 0.3 * torch.randn(n, generator=g)).requires_grad_()
    return dict(new_logp=new, old_logp=old, advantages=torch.randn(n, generator=g),
                new_values=torch.randn(n, generator=g).requires_grad_(), old_values=torch.randn(n, generator=g),
                returns=torch.randn(n, generator=g), entropy=torch.rand(n, generator=g).requires_grad_())


def test_the_loss_is_the_sum_of_the_loss_terms_bit_for_bit_with_the_old_expression():
    """float32, as training runs: the total and its gradients equal those of the expression training
    used before the terms were named, `pg_loss + vf_coef * v_loss - ent_coef * entropy`, exactly."""
    b = _batch()
    terms = ppo_loss(**b, vf_coef=0.5, ent_coef=0.01, clip_vloss=True)
    assert [k for k in terms if k.startswith("loss_")] == ["loss_pg", "loss_value", "loss_entropy"]
    assert not any(v.requires_grad for k, v in terms.items() if not k.startswith("loss_"))
    nv, ov, ret = b["new_values"], b["old_values"], b["returns"]
    v_loss = 0.5 * torch.max((nv - ret).pow(2), (ov + torch.clamp(nv - ov, -0.2, 0.2) - ret).pow(2)).mean()
    old = terms.loss_pg + 0.5 * v_loss - 0.01 * b["entropy"].mean()
    assert torch.equal(v_loss.detach(), terms.v_loss)
    inputs = [b["new_logp"], b["new_values"], b["entropy"]]
    new_grads = torch.autograd.grad(terms.loss, inputs, retain_graph=True)
    old_grads = torch.autograd.grad(old, inputs)
    assert torch.equal(terms.loss, old) and terms.scalars()["loss"] == float(old.detach())
    for g, h in zip(new_grads, old_grads):
        assert torch.equal(g, h)


def test_an_added_loss_term_is_summed_into_the_loss_and_logged():
    terms = ppo_loss(**_batch())
    before = float(terms.loss.detach())
    terms["loss_extra"] = torch.tensor(0.25)
    assert float(terms.loss.detach()) == pytest.approx(before + 0.25)
    assert terms.scalars()["loss_extra"] == 0.25
    with pytest.raises(AttributeError):
        terms.no_such_term  # noqa: B018


def test_the_server_averages_whatever_terms_the_gradients_carry():
    s = grid_server()
    g = np.ones(s.n_params, np.float32)
    out = s.apply([GradResult("low", 0, 0, 10, g, {"loss_x": 1.0, "ratio_max": 2.0}),
                   GradResult("low", 1, 0, 30, g, {"loss_x": 3.0, "ratio_max": 6.0})])
    assert out["loss_x"] == pytest.approx(2.5) and out["ratio_max"] == pytest.approx(5.0)   # weighted by samples


def test_layer_rows_average_every_number_the_updates_report():
    updates = [{"loss_x": 1.0, "grad_norm": 0.5, "per_worker_cosine": {0: 1.0}}, {"loss_x": 3.0}]
    row = rows.layer_row(1, 2, 0, {}, updates, [], "low", [], None)
    assert row["loss_x"] == 2.0 and row["grad_norm"] == 0.5 and "per_worker_cosine" not in row


# ---- modes ---------------------------------------------------------------------------------------
def test_the_registry_names_the_built_in_modes():
    assert MODES == {"gradients": GradientsMode, "experience": ExperienceMode}
    assert LayerConfig().mode in MODES


def test_an_unknown_mode_is_refused_with_the_options(monkeypatch):
    with pytest.raises(ConfigError) as info:
        RunSpec.from_overrides("grid", {"mode": "one_step"}, layers="low")
    assert "'one_step'" in info.value.problem and "'mode'" in info.value.problem
    assert "gradients" in info.value.fix and "experience" in info.value.fix
    with pytest.raises(ConfigError, match="one_step"):          # a config built in Python, at the stage loop
        make_mode(None, "low", LayerConfig(mode="one_step"))     # type: ignore[arg-type]
    monkeypatch.setitem(MODES, "one_step", OneStepMode)
    spec = RunSpec.from_overrides("grid", {"mode": "one_step"}, layers="low")
    assert spec.train.layers["low"].mode == "one_step"


# ---- the epoch loop ------------------------------------------------------------------------------
def _steps(loop: EpochLoop, kls: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    out = []
    for step in loop:
        out.append(step)
        if step in kls:
            loop.measured(kls[step])
    return out


def test_the_epoch_loop_runs_every_step_without_a_target():
    loop = EpochLoop(3, 2, 0.0)
    assert _steps(loop, {(e, m): 1.0 for e in range(3) for m in range(2)}) == [(e, m) for e in range(3)
                                                                              for m in range(2)]
    assert loop.epochs_run == 3


def test_the_epoch_loop_ends_after_the_epoch_whose_mean_kl_passed_the_target():
    loop = EpochLoop(5, 2, 0.1)
    kls = {(0, 0): 0.0, (0, 1): 0.1, (1, 0): 0.1, (1, 1): 0.3}      # means 0.05, then 0.2 > 0.1
    assert _steps(loop, kls) == [(0, 0), (0, 1), (1, 0), (1, 1)] and loop.epochs_run == 2


def test_an_epoch_with_no_kl_measured_does_not_stop_the_loop():
    loop = EpochLoop(2, 3, 1e-9)
    assert len(_steps(loop, {})) == 6 and loop.epochs_run == 2
