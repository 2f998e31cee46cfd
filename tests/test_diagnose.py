"""`hdppo diagnose`: state embedding per worker, coverage, and the metrics panels, on a tiny 2-worker run."""
from __future__ import annotations

import numpy as np

from cli_helpers import cli
from hdppo.cli import main
from hdppo.diagnose import coverage, pca2, run_workers, sample_states
from hdppo.runfolder import load_run_config


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
