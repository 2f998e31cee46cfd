"""`hdppo bench`'s learner rows at a tiny size: the hdppo updates and the bare torch loop do the same
work, the stage timings are there and add up, the ratios are real numbers."""
from __future__ import annotations

import math

import pytest

from hdppo.analysis import bench_learner
from hdppo.analysis.bench import BenchConfig
from hdppo.engine.config import LayerConfig
from hdppo.engine.loop import TIMING_KEYS
from hdppo.errors import ConfigError

TINY = BenchConfig(n_agents=3, max_cycles=25, envs_per_worker=2, rollout=8, updates=2, seconds=0.3, repeats=1,
                   tasks="spread")


@pytest.fixture(scope="module")
def result() -> dict:
    return bench_learner.run_learner(TINY, log=lambda m: None)


def test_the_updates_and_the_bare_loop_do_the_same_work(result: dict) -> None:
    res = result["tasks"]["spread"]
    lc = LayerConfig()
    bare = res["bare"]
    assert bare.optimizer_steps == lc.epochs * lc.minibatches
    rows = TINY.rollout * TINY.envs_per_worker * TINY.workers * TINY.n_agents
    assert bare.rows == rows
    for run in ("gradients", "experience"):
        sr = res["runs"][run]
        assert sr.target_kl == 0 and sr.rounds == TINY.updates
        assert sr.optimizer_steps == bare.optimizer_steps * sr.rounds     # Adam's own step count
        assert sr.epochs == lc.epochs and sr.rows == rows
    default = res["runs"]["default"]
    assert default.target_kl == lc.target_kl and 1 <= default.epochs <= lc.epochs


def test_the_timings_are_there_and_add_up_to_the_stage(result: dict) -> None:
    for run, sr in result["tasks"]["spread"]["runs"].items():
        assert set(sr.timings) == set(TIMING_KEYS)
        assert all(v >= 0 for v in sr.timings.values()), (run, sr.timings)
        t = sr.timings
        assert t["gradient_compute"] <= t["gradient_rounds"]
        parts = sum(t[k] for k in TIMING_KEYS if k != "gradient_compute")
        assert 0 < parts <= sr.seconds
        breakdown = dict(sr.breakdown())
        assert set(breakdown) <= set(bench_learner.PARTS)
        assert all(v >= 0 for v in breakdown.values())
        assert math.isclose(sum(breakdown.values()) * sr.rounds, sr.seconds, rel_tol=1e-9)
        worked = t["train"] if run == "experience" else t["gradient_rounds"]
        assert worked > 0 and t["collect"] > 0
        assert 0 < sr.learner_seconds * sr.rounds <= sr.seconds


def test_the_ratios_and_targets_are_printed(result: dict) -> None:
    ratios = result["tasks"]["spread"]["ratios"]
    assert set(ratios) == {"bare / gradients", "bare / experience", "training / rollout-only"}
    assert all(math.isfinite(v) and v > 0 for v in ratios.values())
    assert result["tasks"]["spread"]["rollout"] > 0
    text = bench_learner.markdown(result, TINY, "hdppo bench --learner-only")
    assert len(result["targets"]) == 3
    for _, name, value, target, met in result["targets"]:
        assert met == (value >= target)
        assert f"| spread | {name} | {value:.2f} | >= {target} | {'met' if met else 'not met'} |" in text
    for part in bench_learner.PARTS:
        assert f"| {part} |" in text


def test_an_unknown_task_is_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="no task 'mpe'"):
        bench_learner.tasks_of(BenchConfig(tasks="spread,mpe"))


@pytest.mark.parametrize("layers", [1, 3])
def test_the_rollout_only_row_steps_the_hierarchy_as_collect_does(layers: int) -> None:
    """It stepped with `hier.step(act)`, which leaves the last decision of each rollout unclosed, and
    the buffer refused the batch (`smdp_gae`: closed transitions with no next decision)."""
    from hdppo.analysis.bench import rollout_only
    cfg = BenchConfig(n_agents=6, max_cycles=25, envs_per_worker=2, seconds=0.5)
    assert rollout_only(cfg, layers, native=True) > 0


def test_compile_bare_times_the_same_loop_with_its_loss_compiled(monkeypatch, result: dict) -> None:
    """`compile_bare=true` adds the bare loop with its loss under torch.compile (here a recording
    stand-in, so the test does not pay a real compile) as its own row, the same work as the bare loop."""
    import dataclasses

    import torch
    compiled = []

    def fake_compile(fn):
        compiled.append(fn.__name__)
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    measured = result["tasks"]["spread"]                 # the training runs as measured: only the bare loops run
    monkeypatch.setattr(bench_learner, "training_run", lambda task, cfg, run: measured["runs"][run])
    monkeypatch.setattr(bench_learner, "rollout_pool", lambda task, cfg: measured["rollout"])
    cfg = dataclasses.replace(TINY, compile_bare=True, updates=1)
    out = bench_learner.run_learner(cfg, log=lambda m: None)
    res = out["tasks"]["spread"]
    assert compiled == ["loss"]
    assert res["bare_compiled"].optimizer_steps == res["bare"].optimizer_steps
    assert res["bare_compiled"].rows == res["bare"].rows
    assert math.isclose(res["compile_speedup"], res["bare"].seconds / res["bare_compiled"].seconds)
    table = bench_learner.markdown(out, cfg, "hdppo bench --learner-only compile_bare=true")
    assert "| spread | " in table.split("`torch.compile`")[1] and "x |" in table
    assert "bare_compiled" not in result["tasks"]["spread"]                 # off by default
