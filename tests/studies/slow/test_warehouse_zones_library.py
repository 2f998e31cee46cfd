"""examples/studies/warehouse_zones.py --library: a warehouse skill run's robots play under each
dispatcher through hdppo.load (its mid replaced), seeded, and the pick count is the episodes' own."""
from __future__ import annotations

import pytest

from examples.studies.warehouse_zones import main, play_library


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    out = tmp_path_factory.mktemp("wz") / "skills"
    from hdppo.cli import main as hdppo_main
    assert hdppo_main(["train", "warehouse", "--skills", "--steps", "4096", "--backend", "inline", "--workers", "1",
                       "--seed", "0", "--no-progress", "--out", str(out), "off_goal_pick=-1"]) == 0
    return out


@pytest.mark.parametrize("dispatcher", ["random", "nearest", "zone 0"])
def test_each_dispatcher_plays_the_library_and_repeats_with_its_seed(library, dispatcher):
    a = play_library(str(library), {"max_steps": "40"}, dispatcher, episodes=2, seed=3)
    assert a == play_library(str(library), {"max_steps": "40"}, dispatcher, episodes=2, seed=3)
    assert 0.0 <= a["delivery_rate"] <= 1.0 and 0.0 <= a["picks_in_goal_zone"] <= 1.0
    assert a["picks"] > 0


def test_main_prints_the_library_rows(library, capsys):
    main(["--episodes", "4", "--set", "max_steps=40", "--library", str(library), "--library-episodes", "1"])
    out = capsys.readouterr().out
    assert f"skill library {library}" in out
    assert all(f"  {name:9s} delivery_rate" in out for name in ("random", "nearest", "zone 0", "no zones"))
