"""`hdppo eval` a user can trust: overrides, eval.json / --json, refusals, exact and across-seed intervals,
run folders usable from any directory, --load RUN."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hdppo.cli import main
from hdppo.stats import diff_ci, mean_ci, outcome_ci, rate_ci, seeds_ci
from tests.helpers import ROOT, TINY_CLI
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run

FAST = TINY_CLI


pytestmark = pytest.mark.usefixtures("wide_console")      # rich tables keep one line per row


@pytest.fixture(scope="module")
def skirmish_run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("ev") / "skirmish", "skirmish", {"max_steps": "40"})


# ---- intervals -------------------------------------------------------------------------------------
def test_rate_interval_is_exact_not_degenerate():
    assert rate_ci(0, 20) == pytest.approx((0.0, 0.0, 0.168), abs=1e-3)
    assert rate_ci(20, 20) == pytest.approx((1.0, 0.832, 1.0), abs=1e-3)
    mean, lo, hi = rate_ci(10, 20)
    assert mean == 0.5 and lo == pytest.approx(0.272, abs=1e-3) and hi == pytest.approx(0.728, abs=1e-3)
    assert outcome_ci([0.0] * 20) == rate_ci(0, 20)           # 0/1 outcomes are rates


def test_mean_interval_covers_and_shrinks():
    rng = np.random.default_rng(0)
    small, big = rng.normal(3, 1, 20), rng.normal(3, 1, 2000)
    m, lo, hi = mean_ci(small)
    assert lo < m < hi and lo < 3 < hi
    _, lo2, hi2 = mean_ci(big)
    assert hi2 - lo2 < (hi - lo) / 4
    assert mean_ci([2.0, 2.0]) == (2.0, 2.0, 2.0)


def test_seed_interval_is_across_seeds_not_pooled_episodes():
    """Three seeds that disagree: pooling 3 x 200 episodes would claim a narrow interval; across seeds it is wide."""
    seeds = [[1.0] * 180 + [0.0] * 20, [1.0] * 100 + [0.0] * 100, [1.0] * 20 + [0.0] * 180]
    m, lo, hi = seeds_ci(seeds)
    pooled = outcome_ci([x for seed in seeds for x in seed])
    assert m == pytest.approx(0.5) and lo == 0.0 and hi == 1.0           # t with 2 dof over means .9 .5 .1
    assert pooled[2] - pooled[1] < 0.1
    assert seeds_ci([[0.0] * 20]) == rate_ci(0, 20)                      # one seed: its episodes


def test_difference_interval_matches_welch_t_test():
    """mean(a) - mean(b) with scipy's own Welch interval as the reference (unequal sizes and spreads)."""
    from scipy.stats import ttest_ind
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 0.5, 3), rng.normal(0.2, 2.0, 5)
    ref = ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    d, lo, hi = diff_ci(a, b)
    assert d == pytest.approx(a.mean() - b.mean())
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    assert diff_ci([1.0, 1.0], [0.5, 0.5]) == (0.5, 0.5, 0.5)                 # no spread: no width
    assert all(np.isnan(diff_ci([1.0], [0.0, 1.0])))                          # one replicate: no interval


# ---- hdppo eval --------------------------------------------------------------------------------------
def test_eval_writes_eval_json_and_prints_json(skirmish_run, capsys):
    rc, out, err = cli(capsys, "eval", skirmish_run, "--episodes", "3", "--json", "difficulty=0.8")
    assert rc == 0, err
    res = json.loads(out)
    saved = json.loads((skirmish_run / "eval.json").read_text())
    assert saved.pop("written") and saved == res
    assert res["episodes"] == 3 and res["overrides"] == {"difficulty": "0.8"}
    assert res["acting"] == {"high": "checkpoint", "mid": "checkpoint", "low": "checkpoint"}
    lo, hi = res["win"][1], res["win"][2]
    assert 0.0 <= lo <= res["win"][0] <= hi <= 1.0 and hi > 0.0          # exact interval, never [0, 0]


def test_eval_override_reaches_the_scenario(skirmish_run, capsys):
    rc, _, err = cli(capsys, "eval", skirmish_run, "--episodes", "1", "difficulty=2")
    assert rc == 2 and "difficulty=2.0 is outside [0, 1]" in err


@pytest.mark.parametrize("episodes", ["0", "-3"])
def test_eval_rejects_fewer_than_one_episode(skirmish_run, capsys, episodes):
    rc, _, err = cli(capsys, "eval", skirmish_run, "--episodes", episodes)
    assert rc == 2 and f"--episodes must be at least 1 (got {episodes})" in err and "Traceback" not in err


def test_eval_refuses_a_trained_layer_without_checkpoint(tmp_path, capsys):
    run = make_run(tmp_path / "g", "grid", layers=["low"])
    config = json.loads((run / "config.json").read_text())
    config["layers"] = ["mid", "low"]
    (run / "config.json").write_text(json.dumps(config))
    rc, _, err = cli(capsys, "eval", run, "--episodes", "2")
    assert rc == 2 and "trained layer 'mid' but holds no checkpoint" in err and "--allow-untrained" in err
    rc, out, err = cli(capsys, "eval", run, "--episodes", "2", "--allow-untrained", "--json")
    assert rc == 0, err
    assert json.loads(out)["acting"] == {"high": "uniform", "mid": "uniform", "low": "checkpoint"}


# ---- run folders ---------------------------------------------------------------------------------------
def test_path_scenario_run_evaluates_from_anywhere(tmp_path, capsys, monkeypatch):
    """The scenario file is copied into the run at train start: eval works after the original is gone,
    once the user trusts the run's copy (--trust-run)."""
    src = tmp_path / "work" / "myline.py"
    src.parent.mkdir()
    shutil.copyfile(ROOT / "examples" / "scenarios" / "line.py", src)
    monkeypatch.chdir(src.parent)
    rc, _, err = cli(capsys, "train", "myline.py", "--steps", "200", *FAST, "--out", "run")
    assert rc == 0, err
    run = src.parent / "run"
    assert (run / "scenario.py").read_bytes() == src.read_bytes()
    record = json.loads((run / "scenario_source.json").read_text())
    assert record["path"] == str(src) and len(record["sha256"]) == 64
    assert json.loads((run / "config.json").read_text())["resolved"]["workers"] == 1
    src.unlink()
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "eval", run, "--episodes", "2", "--json")     # the copy runs only if trusted
    assert rc == 2 and "--trust-run" in err and "Traceback" not in err
    rc, out, err = cli(capsys, "eval", run, "--episodes", "2", "--json", "--trust-run")
    assert rc == 0, err
    assert json.loads(out)["episodes"] == 2


def test_load_accepts_a_run_folder(tmp_path, capsys):
    low = tmp_path / "low"
    assert main(["train", "grid", "--layer", "low", "--steps", "200", *FAST, "--out", str(low)]) == 0
    rc, _, err = cli(capsys, "train", "grid", "--layer", "mid", "--load", f"low={low}", "--steps", "200", *FAST,
                     "--out", tmp_path / "mid")
    assert rc == 0, err
    config = json.loads((tmp_path / "mid" / "config.json").read_text())
    assert config["frozen"] == {"low": str(low / "checkpoints" / "low")}
    rc, _, err = cli(capsys, "train", "grid", "--layer", "mid", "--load", f"high={low}", "--steps", "200", *FAST,
                     "--out", tmp_path / "bad")
    assert rc == 2 and "has no checkpoint for layer 'high'" in err
