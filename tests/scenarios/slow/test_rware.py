"""rware: every size passes `hdppo check`, flat and with the dispatcher; a short training finishes and
`hdppo eval` reports the deliveries."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("rware", reason="pip install 'hdppo[rware]'")

from hdppo.team.check import run_check
from tests.helpers import TINY_CLI
from tests.helpers.cli import cli


@pytest.mark.parametrize("size", ["tiny-2ag", "tiny-4ag", "small-4ag"])
@pytest.mark.parametrize("hard", ["false", "true"])
@pytest.mark.parametrize("layers", ["1", "2"])
def test_every_size_passes_check(size, hard, layers):
    report = run_check("rware", {"size": size, "hard": hard, "layers": layers}, episodes=1, n_envs=2, seed=0,
                       api_cycles=20)
    assert report.ok, [f"{line.name}: {line.detail}" for line in report.lines if not line.ok]


@pytest.mark.parametrize("layers", ["1", "2"])
def test_short_training_then_eval_reports_deliveries(tmp_path, capsys, layers):
    run = tmp_path / "run"
    rc, _, err = cli(capsys, "train", "rware", "--steps", "2000", *TINY_CLI, f"layers={layers}", "--out", run)
    assert rc == 0, err
    rc, _, err = cli(capsys, "eval", run, "--episodes", "2", "--json")
    assert rc == 0, err
    deliveries = json.loads((run / "eval.json").read_text())["outcomes"]["deliveries"]
    assert deliveries[0] >= 0.0
