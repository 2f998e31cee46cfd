"""`hdppo plot`: learning curves from run folders."""
from __future__ import annotations

from pathlib import Path

import pytest

from hdppo.cli import main
from hdppo.errors import ConfigError
from hdppo.plot import plot_runs


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
