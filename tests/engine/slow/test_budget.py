"""What a budget buys each layer, printed at train start; starved layers warn with the key to change."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from hdppo.engine.budget import plan_budget, schedule_progress
from hdppo.engine.config import resolve_overrides
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer, plan_stages
from hdppo.team.scenario import load_scenario


def trainer_for(scenario: str, steps: int, tmp_path, **over) -> Trainer:
    sc = load_scenario(scenario)
    names = [s.name for s in sc.build_layers(sc.make_config())]
    tc, scen = resolve_overrides({"steps": str(steps), "workers": "2", **{k: str(v) for k, v in over.items()}},
                                 names, set(sc.make_config().__dataclass_fields__))
    return Trainer(RunSpec(scenario, scen, tc, names, {}, tmp_path / "run"))


def test_readme_main_job_gives_every_layer_at_least_20_updates(tmp_path):
    """README: `hdppo train skirmish --layer all --steps 300000` (2 workers x 16 envs)."""
    t = trainer_for("skirmish", 300_000, tmp_path)
    (stage,) = t.budget
    assert {lb.layer for lb in stage.layers} == {"high", "mid", "low"}
    for lb in stage.layers:
        assert lb.updates >= 20, lb
        assert lb.lr_last > 0


def test_starved_layer_warns_with_the_key_to_change(tmp_path):
    with pytest.warns(UserWarning, match=r"layer 'high' gets [0-9] update.*high\.rollout=") as rec:
        trainer_for("skirmish", 30_000, tmp_path)
    assert not any("'low'" in str(w.message) for w in rec)


def test_enough_updates_gives_no_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = trainer_for("skirmish", 300_000, tmp_path)
    assert not [w for w in caught if "update(s)" in str(w.message)]
    assert min(lb.updates for lb in t.budget[0].layers) >= 10


def test_budget_counts_match_a_real_run(tmp_path):
    """The planned updates, rounding and last lr are what a run then does (grid, inline)."""
    t = trainer_for("grid", 1000, tmp_path, backend="inline", envs_per_worker=2, rollout=16,
                    **{"high.rollout": 64}, progress="false")
    (stage,) = t.budget
    assert stage.runs == 1024                                 # 1000 rounded up to rounds of 16 x 2 x 2
    planned = {lb.layer: lb for lb in stage.layers}
    assert planned["low"].updates == 16 and planned["high"].updates == 4
    summary = t.run()["concurrent"]
    assert summary["env_steps"] == stage.runs
    assert summary["rounds"] == {n: planned[n].updates for n in ("high", "mid", "low")}
    from hdppo.engine.metrics import read_csv
    for name in ("high", "low"):
        lrs = [r["lr"] for r in read_csv(t.out, name)]
        assert lrs[0] == pytest.approx(planned[name].lr_first)
        assert lrs[-1] == pytest.approx(planned[name].lr_last)


def test_schedule_progress_is_where_the_rollout_started():
    assert schedule_progress(2048, 2048, 10_000) == 0.0      # first update: full lr
    assert schedule_progress(4096, 2048, 10_000) == pytest.approx(0.2048)
    assert schedule_progress(100, 2048, 10_000) == 0.0


def test_bottom_up_budget_per_stage(tmp_path):
    names = ["high", "mid", "low"]
    tc, _ = resolve_overrides({"steps": "30000", "schedule": "bottom-up", "workers": "1"}, names, set())
    stages = plan_stages(names, names, tc)
    infos = {n: k for n, k in zip(names, (8, 4, 1))}
    budget = plan_budget(stages, tc.layers, infos, {"high": 4, "mid": 4, "low": 4}, 1, 16)
    assert [b.name for b in budget] == ["bottom-up:low", "bottom-up:mid", "bottom-up:high"]
    for b in budget:
        (lb,) = b.layers
        assert lb.lr_first == pytest.approx(3e-4)               # each stage starts at the configured lr


def test_cli_prints_the_budget_and_the_rounding(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hdppo.cli", "train", "grid", "--layer", "low", "--steps", "1000",
                          "--workers", "1", "--backend", "inline", "--out", str(tmp_path / "r"), "progress=false",
                          "envs_per_worker=4"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "1,000 env steps, runs 1,024 (rounded up" in text
    assert "low: 4 updates, one per 256 env steps" in text
    assert "hdppo: warning: layer 'low' gets 4 update(s)" in " ".join(out.stderr.split())
