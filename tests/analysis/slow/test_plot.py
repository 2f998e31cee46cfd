"""`hdppo plot`: learning curves from run folders."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hdppo.analysis.plot import plot_runs
from hdppo.cli import main
from hdppo.errors import ConfigError


def _run(tmp_path: Path, name: str, seed: int) -> Path:
    out = tmp_path / name
    assert main(["train", "grid", "--layer", "low", "--steps", "1500", "--backend", "inline", "--workers", "1",
                 "--seed", str(seed), "--no-progress", "envs_per_worker=2", "rollout=16", "epochs=1",
                 "log_every=0", "--out", str(out)]) == 0
    return out


def test_plot_writes_a_png_with_one_line_per_run(tmp_path):
    a, b = _run(tmp_path, "a", 0), _run(tmp_path, "b", 1)
    png = plot_runs([a, b], tmp_path / "curves.png", metrics=("return", "approx_kl"))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert main(["plot", str(a), "--out", str(tmp_path / "one.png"), "--metric", "entropy"]) == 0
    assert (tmp_path / "one.png").stat().st_size > 2000


def test_plot_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(ConfigError, match="not an hdppo run folder"):
        plot_runs([tmp_path], tmp_path / "x.png")
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    assert not (tmp_path / "x.png").exists()


def _fake_run(folder: Path, seed: int, rows: dict[str, list[dict[str, float]]]) -> Path:
    """A run folder with hand-written metrics CSVs (scope -> rows)."""
    import csv
    import json
    (folder / "metrics").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"scenario": "grid", "train": {"seed": seed},
                                                    "layer_names": ["high", "low"]}))
    for scope, rs in rows.items():
        with open(folder / "metrics" / f"{scope}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rs[0]))
            w.writeheader()
            w.writerows(rs)
    return folder


def test_plot_reads_run_csv_columns_and_one_point_layers(tmp_path):
    from hdppo.analysis.plot import panels_for, run_curves
    run = _fake_run(tmp_path / "r", 0, {
        "run": [{"step": 100, "wall_time": 1, "win": 0.0, "team_return": 1.0},
                {"step": 200, "wall_time": 2, "win": 0.5, "team_return": 2.0}],
        "high": [{"step": 200, "wall_time": 2, "return": 3.0}],               # one point only
        "low": [{"step": 100, "wall_time": 1, "return": 1.0}, {"step": 200, "wall_time": 2, "return": 1.5}]})
    data = {run: run_curves(run)}
    assert set(data[run]["run"]) == {"win", "team_return"}
    assert panels_for(data, ("return", "win")) == [("high", "return"), ("low", "return"), ("run", "win")]
    png = plot_runs([run], metrics=("win",), strict=True)
    assert png == run / "curves.png" and png.stat().st_size > 2000      # next to the run by default
    assert main(["plot", str(run), "--metric", "return"]) == 0


def test_plot_unknown_metric_lists_the_valid_ones(tmp_path, capsys):
    run = _fake_run(tmp_path / "r", 0, {"run": [{"step": 1, "wall_time": 1, "win": 1.0}],
                                        "low": [{"step": 1, "wall_time": 1, "entropy": 0.5}]})
    with pytest.raises(ConfigError, match="choose --metric from: entropy, win"):
        plot_runs([run], metrics=("winrate",), strict=True)
    assert main(["plot", str(run), "--metric", "winrate"]) == 2
    assert "choose --metric from: entropy, win" in capsys.readouterr().err


def test_seeds_of_one_config_are_averaged_with_a_band(tmp_path):
    import json

    from hdppo.analysis.plot import band, seed_group_key
    a = _fake_run(tmp_path / "a", 0, {"run": [{"step": 0, "wall_time": 0, "win": 0.0},
                                              {"step": 100, "wall_time": 1, "win": 1.0}]})
    b = _fake_run(tmp_path / "b", 1, {"run": [{"step": 0, "wall_time": 0, "win": 0.0},
                                              {"step": 100, "wall_time": 1, "win": 0.0}]})
    ka, kb = (seed_group_key(json.loads((r / "config.json").read_text())) for r in (a, b))
    assert ka == kb
    x = np.array([0.0, 100.0])
    grid, mean, lo, hi = band([(x, np.array([0.0, 1.0])), (x, np.array([0.0, 0.0]))], points=3)
    np.testing.assert_allclose(grid, [0, 50, 100])
    np.testing.assert_allclose(mean, [0, 0.25, 0.5])
    assert lo[0] == hi[0] == 0.0 and lo[2] < 0.5 < hi[2]                  # no spread at 0, a band at the end
    assert hi[2] - 0.5 == pytest.approx(12.706 * np.sqrt(0.5) / np.sqrt(2), rel=1e-3)  # t(.975, 1) * sd / sqrt(n)
    png = plot_runs([a, b], metrics=("win",))
    assert png == tmp_path / "curves.png"
