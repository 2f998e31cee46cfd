"""`hdppo train --seeds`: the seed lists it reads and the combinations it refuses, each in one line
with its fix, before anything is trained."""
from __future__ import annotations

import pytest

from hdppo.cli.app import parse
from tests.helpers.cli import cli


@pytest.mark.parametrize("text, seeds", [("0-4", [0, 1, 2, 3, 4]), ("0,2,5", [0, 2, 5]), ("0-2,7", [0, 1, 2, 7]),
                                         ("3", [3]), (" 1 - 2 ", [1, 2])])
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse(["train", "grid", "--seeds", text]).seeds == seeds


@pytest.mark.parametrize("text, says", [("3-1", "not a range from low to high"), ("a", "not a seed"),
                                        ("1,0-2", "lists seed 1 twice"), ("-1", "not a seed"),
                                        ("0-5000", "more than 1,000 seeds")])
def test_bad_seed_lists_are_one_line(capsys, text: str, says: str) -> None:
    rc, out, err = cli(capsys, "train", "grid", "--seeds", text)
    assert rc == 2 and err.startswith("hdppo: error: --seeds") and says in err and "\n  fix: " in err
    assert "usage:" not in err


@pytest.mark.parametrize("extra, names", [(["--seed", "3"], "--seed"), (["seed=3"], "seed="),
                                          (["train.seed=3"], "train.seed="), (["--resume", "runs/g"], "--resume")])
def test_seeds_refuse_another_seed_or_resume(capsys, tmp_path, extra: list[str], names: str) -> None:
    rc, out, err = cli(capsys, "train", "grid", "--seeds", "0-1", "--out", tmp_path / "g", *extra)
    assert rc == 2 and err.startswith("hdppo: error: --seeds and ") and names in err, err
    assert "\n  fix: " in err and not (tmp_path / "g").exists()


def test_seeds_refuse_a_config_file_seed(capsys, tmp_path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("seed: 4\n")
    rc, out, err = cli(capsys, "train", "grid", "--seeds", "0-1", "--config", config, "--out", tmp_path / "g")
    assert rc == 2 and "--seeds and --config" in err and "fix: drop --config" in err


def test_a_folder_that_is_no_seed_group_is_refused(capsys, tmp_path) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "notes.txt").write_text("mine")
    rc, out, err = cli(capsys, "train", "grid", "--seeds", "0-1", "--out", tmp_path / "g")
    assert rc == 2 and "is not a seed group" in err


def test_resuming_a_group_refuses_a_track_flag(capsys, tmp_path) -> None:
    """A resumed group keeps each seed's tracking run (RUN/tracking.json); --track beside it would be ignored."""
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "seeds.json").write_text("{}")
    rc, out, err = cli(capsys, "train", "--resume", tmp_path / "g", "--track", "mlflow")
    assert rc == 2 and "--track would be ignored" in err and "\n  fix: " in err, err
