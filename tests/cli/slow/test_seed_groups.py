"""Seed groups end to end on tiny `grid` runs: `hdppo train --seeds` makes one run folder per seed,
a failed seed stops the group and rerunning continues it, `hdppo eval` aggregates across the seeds
and `hdppo plot` draws them as one group."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hdppo.analysis.plot import group_label
from hdppo.analysis.seed_group import expand_runs, read_manifest
from hdppo.errors import HdppoError
from tests.helpers import TINY_CLI
from tests.helpers.cli import cli

NO_SEED = [a for a in TINY_CLI if a not in ("--seed", "0")]
COMMAND = ["train", "grid", *NO_SEED, "--steps", "64", "--layer", "low"]


def state(run: Path) -> dict:
    return json.loads((run / "state.json").read_text())


def test_seeds_make_one_normal_run_per_seed_and_a_rerun_keeps_them(capsys, tmp_path) -> None:
    group = tmp_path / "g"
    rc, out, err = cli(capsys, *COMMAND, "--seeds", "0,2", "--out", group)
    assert rc == 0, err
    manifest = read_manifest(group)
    assert manifest["seeds"] == [0, 2] and manifest["command"].startswith("hdppo train grid ")
    for seed in (0, 2):
        run = group / f"seed_{seed}"
        config = json.loads((run / "config.json").read_text())
        assert config["train"]["seed"] == seed and state(run)["finished"] is True
    assert sorted(p.name for p in group.iterdir()) == ["seed_0", "seed_2", "seeds.json"]
    assert f"hdppo eval {group}" in out

    before = (group / "seed_0" / "state.json").stat().st_mtime_ns
    rc, out, err = cli(capsys, *COMMAND, "--seeds", "0,2-3", "--out", group)      # one more seed
    assert rc == 0, err
    assert "seed 0 (1 of 3)" in out and "finished, kept" in out
    assert (group / "seed_0" / "state.json").stat().st_mtime_ns == before          # not trained again
    assert state(group / "seed_3")["finished"] is True and read_manifest(group)["seeds"] == [0, 2, 3]

    rc, out, err = cli(capsys, *COMMAND, "lr=1e-3", "--seeds", "0,2-3", "--out", group)
    assert rc == 2 and "holds the seed group of another command" in err
    rc, out, err = cli(capsys, *COMMAND, "--seeds", "2-3", "--out", group)
    assert rc == 2 and "leaves out seed 0" in err


def test_a_failed_seed_stops_the_group_and_a_rerun_continues_it(capsys, tmp_path, monkeypatch) -> None:
    from hdppo.engine.trainer import Trainer
    real = Trainer.run

    def fail_seed_1(self):
        if self.out.name == "seed_1":
            raise HdppoError("worker 0 broke", "look at the worker")
        return real(self)
    monkeypatch.setattr(Trainer, "run", fail_seed_1)
    group = tmp_path / "g"
    rc, out, err = cli(capsys, *COMMAND, "--seeds", "0-2", "--out", group)
    assert rc == 2
    err = "\n".join(line for line in err.splitlines() if not line.startswith("hdppo: warning:"))
    assert err.startswith(f"hdppo: error: seed 1 ({group / 'seed_1'}) failed: worker 0 broke\n  fix: look at")
    assert "seeds 0 are finished and kept" in err and f"hdppo train --resume {group}" in err
    assert state(group / "seed_0")["finished"] is True and state(group / "seed_1")["finished"] is False
    assert not (group / "seed_2").exists()

    monkeypatch.setattr(Trainer, "run", real)
    rc, out, err = cli(capsys, "train", "--resume", group, "--no-progress")
    assert rc == 0, err
    assert "seed 0 (1 of 3)" in out and "unfinished, resumed" in out and "resuming from commit" in out
    assert all(state(group / f"seed_{s}")["finished"] for s in range(3))
    rc, out, err = cli(capsys, "train", "--resume", group, "lr=1e-3")
    assert rc == 2 and "would be ignored" in err


@pytest.fixture
def group(capsys, tmp_path) -> Path:
    out = tmp_path / "g"
    rc, _, err = cli(capsys, *COMMAND, "--seeds", "0-2", "--out", out)
    assert rc == 0, err
    return out


def test_eval_on_a_group_gives_each_seed_and_the_aggregate(capsys, group, wide_console) -> None:
    rc, out, err = cli(capsys, "eval", group, "--episodes", "4")
    assert rc == 0, err
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert {"0", "1", "2", "team_return", "return/low", "success"} <= set(rows)
    assert "mean [t interval]" in out and "IQM [stratified bootstrap]" in out
    saved = json.loads((group / "eval.json").read_text())
    assert saved["seeds"] == [0, 1, 2] and set(saved["per_seed"]) == {"0", "1", "2"}
    team = saved["aggregate"]["team_return"]
    assert set(team) == {"per_seed", "mean", "iqm"} and len(team["per_seed"]) == 3
    assert team["iqm"][1] <= team["iqm"][0] <= team["iqm"][2]
    for seed in range(3):                                   # each seed's own eval.json, a normal run's
        own = json.loads((group / f"seed_{seed}" / "eval.json").read_text())
        assert own["team_return"][0] == pytest.approx(team["per_seed"][str(seed)])


def test_plot_on_a_group_draws_its_seeds_as_one_group(capsys, group) -> None:
    runs = expand_runs([group])
    assert runs == [group / f"seed_{s}" for s in range(3)] and group_label(runs) == "g"
    rc, out, err = cli(capsys, "plot", group)
    assert rc == 0, err
    assert (group / "curves.png").is_file() and f"wrote {group / 'curves.png'}" in out
