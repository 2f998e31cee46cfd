"""`hdppo diagnose`: state embedding per worker, coverage, and the metrics panels, on a tiny 2-worker run."""
from __future__ import annotations

import numpy as np

from hdppo.analysis.diagnose import coverage, pca2, run_workers, sample_states
from hdppo.cli import main
from hdppo.runfolder import load_run_config
from tests.helpers.cli import cli


def test_pca_finds_the_spread_direction():
    rng = np.random.default_rng(0)
    t = rng.normal(size=500)
    x = np.stack([t, t, 0.01 * rng.normal(size=500), rng.normal(size=500) * 0.01], axis=1)
    emb, ratio = pca2(x)
    assert ratio[0] > 0.45 and abs(np.corrcoef(emb[:, 0], t)[0, 1]) > 0.99


def test_coverage_shares_and_union():
    emb = np.array([[0.0, 0.0], [0.1, 0.0], [1.0, 1.0], [0.9, 1.0]])
    worker = np.array([0, 0, 1, 1])
    own, union = coverage(emb, worker, bins=2)
    np.testing.assert_allclose(own, [0.5, 0.5])           # two occupied cells, one each
    np.testing.assert_allclose(union, [0.5, 1.0])


def test_diagnose_a_two_worker_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "grid", "--steps", "600", "--workers", "2", "--backend", "inline", "--no-progress",
                 "rollout=16", "epochs=1", "log_every=0", "envs_per_worker=2", "--out", str(run)]) == 0
    assert run_workers(run, load_run_config(run)) == 2
    states = sample_states(run, 2, steps=20)
    x, w = states["low"]
    assert set(np.unique(w)) == {0, 1} and x.shape[1] == 18             # grid unit obs 15 + grounded goal 3
    assert not np.array_equal(x[w == 0][:10], x[w == 1][:10])   # each worker plays its own env seeds
    rc, out, err = cli(capsys, "diagnose", run, "--steps", "20")
    assert rc == 0, err
    for layer in ("high", "mid", "low"):
        png = run / "diagnose" / f"{layer}.png"
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000


def test_ablate_retrains_with_k_of_n_workers_data(tmp_path):
    """--ablate: one short run per k = 1..N; the k=1 run's layer learns from half the transitions of
    the k=2 run (its other worker still plays), and the report compares their final returns."""
    import json
    import subprocess
    import sys

    from hdppo.engine.metrics import read_csv
    run = tmp_path / "run"
    base = [sys.executable, "-m", "hdppo.cli"]
    subprocess.run(base + ["train", "grid", "--layer", "low", "--steps", "512", "--workers", "2", "--backend", "inline",
                           "--out", str(run), "--no-progress", "envs_per_worker=2", "rollout=16"],
                   check=True, capture_output=True, timeout=300)
    out = subprocess.run(base + ["diagnose", str(run), "--steps", "20", "--ablate", "--ablate-steps", "256"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run / "diagnose" / "ablate" / "ablate.json").read_text())
    assert [r["workers_learnt_from"] for r in summary["rows"]] == [1, 2]
    assert all(np.isfinite(r["final_team_return"]) for r in summary["rows"])
    assert summary["rows"][1]["change_vs_all"] == 0.0
    t1 = [r["transitions"] for r in read_csv(run / "diagnose" / "ablate" / "pool-1", "low")]
    t2 = [r["transitions"] for r in read_csv(run / "diagnose" / "ablate" / "pool-2", "low")]
    assert t1 and len(t1) == len(t2) and all(a * 2 == b for a, b in zip(t1, t2))
    assert (run / "diagnose" / "ablate" / "ablate.png").is_file()
    assert "learning from 1 worker(s)" in out.stdout
