"""A PettingZoo scenario's episode metrics (examples/scenarios/foraging.py's `episode_info` hook) reach
every place a run shows metrics: run.csv's episode means, TensorBoard's run/ scalars, `hdppo plot`
and `hdppo eval`'s outcomes."""
from __future__ import annotations

import math

import pytest

import hdppo
from hdppo.analysis.plot import plot_runs
from hdppo.engine.metrics import read_csv
from hdppo.runtime.evaluate import evaluate
from tests.helpers import ROOT, TINY

pytest.importorskip("lbforaging", reason="lbforaging is the gymnasium-ma extra: pip install 'hdppo[gymnasium-ma]'")

FORAGING = str(ROOT / "examples" / "scenarios" / "foraging.py")


def test_foraging_metrics_reach_run_csv_tensorboard_plot_and_eval(tmp_path):
    run = hdppo.train(FORAGING, {**TINY, "steps": 400, "log_every": 0.0, "max_steps": 20}, out=tmp_path / "run")
    rows = [r for r in read_csv(run, "run") if not math.isnan(r.get("food_collected", math.nan))]
    assert rows, "run.csv has no food_collected episode means"     # (NaN in rows before the first episode)
    assert all(0.0 <= r["food_collected"] <= 1.0 and 0.0 <= r["cleared"] <= 1.0 for r in rows)

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tags: set[str] = set()
    for p in run.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(p))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    assert {"run/food_collected", "run/cleared"} <= tags

    png = plot_runs([run], tmp_path / "curves.png", metrics=("food_collected", "cleared"), strict=True)
    assert png.is_file() and png.stat().st_size > 0

    res = evaluate(run, episodes=3, envs=2, seed=0)
    assert set(res["outcomes"]) == {"food_collected", "cleared"}
