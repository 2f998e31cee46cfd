"""Training and server helpers shared by the engine's test files (on the small `grid` scenario)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hdppo.engine import learner
from hdppo.engine.checkpoint import load_checkpoint
from hdppo.engine.config import resolve_overrides
from hdppo.engine.modes import Call, Mode
from hdppo.engine.server import ParameterServer
from hdppo.engine.spec import RunSpec, layer_infos
from hdppo.engine.trainer import Trainer
from hdppo.team.scenario import load_scenario

GRID_LAYERS = ["high", "mid", "low"]


def train(out: Path, layers: list[str], scenario: str = "grid", frozen: dict | None = None, **overrides) -> Trainer:
    names = [s.name for s in load_scenario(scenario).build_layers(load_scenario(scenario).make_config())]
    keys = set(load_scenario(scenario).make_config().__dataclass_fields__)
    tc, scen = resolve_overrides({k: str(v) for k, v in overrides.items()}, names, keys)
    t = Trainer(RunSpec(scenario, scen, tc, layers, frozen or {}, out))
    t.run()
    return t


def params_of(run: Path, layer: str) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_checkpoint(run / "checkpoints" / layer)[0].items()}


def grid_server(lc_overrides: dict | None = None) -> ParameterServer:
    """The parameter server of grid's low layer, with layer settings as `key=value` strings."""
    sc = load_scenario("grid")
    info = layer_infos(sc, sc.make_config(), 0)[2]
    tc, _ = resolve_overrides(lc_overrides or {}, GRID_LAYERS, set())
    return ParameterServer(info, tc.layers["low"], seed=0)


def with_kl_penalty(monkeypatch: pytest.MonkeyPatch, beta: float) -> None:
    """A KL penalty term, `loss_kl = beta * KL(old || new)` with its gradient, added to every
    minibatch loss (workers' and servers', which both call learner.minibatch_loss)."""
    real = learner.ppo_loss

    def with_kl(new_logp, old_logp, *args, **kw):
        terms = real(new_logp, old_logp, *args, **kw)
        logratio = new_logp - old_logp
        terms["loss_kl"] = beta * ((logratio.exp() - 1.0) - logratio).mean()
        return terms
    monkeypatch.setattr(learner, "ppo_loss", with_kl)


class OneStepMode(Mode):
    """A toy mode: one gradient per batch (the first minibatch of the first epoch)."""

    def update(self) -> list[dict]:
        out = self.server.apply(self.driver.timed_call("gradient_rounds", self.pool, "gradient", self.name, 0, 0))
        if not out:
            return []
        self.driver.publish(self.name)
        return [out]

    def calls(self, worker):
        yield Call("gradient", (self.name, 0, 0), self.name)

    def answer(self, worker, result):
        if self.server.apply_async(result):
            self.driver.publish(self.name)
            self.log_latest([dict(result.stats)])
