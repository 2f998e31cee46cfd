"""`hdppo eval --uniform LAYER` (play/evaluate `uniform=`): that layer acts uniformly at random instead
of from its checkpoint or script, the random-commander ablation of the evidence protocol."""
from __future__ import annotations

import json

import pytest

from hdppo.errors import ConfigError
from hdppo.runtime.evaluate import evaluate, play
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("uniform")
    # the same random networks (make_run seeds each layer's by its index); "units" has no commander's checkpoint
    full = make_run(base / "full", "grid", {"layers": "2"})
    units = make_run(base / "units", "grid", {"layers": "2"}, layers=["low"])
    scripted = make_run(base / "scripted", "grid", {"layers": "2"}, layers=[])     # units walk to their goal
    return full, units, scripted


def _key(records):
    return [(r["length"], round(r["team_return"], 9), round(r["return/high"], 9)) for r in records]


def test_a_uniform_commander_plays_as_one_without_a_checkpoint(runs):
    full, units, _ = runs
    trained = play(full, episodes=6, seed=5)
    random_top = play(full, episodes=6, seed=5, uniform=["high"])
    assert _key(random_top) == _key(play(units, episodes=6, seed=5))      # high drawn uniformly, low as before
    assert _key(random_top) != _key(trained)                              # not the commander's checkpoint


def test_uniform_replaces_a_script_too(runs):
    _, _, scripted = runs
    greedy = evaluate(scripted, episodes=20)
    assert greedy["acting"]["low"] == "scripted"
    random_units = evaluate(scripted, episodes=20, uniform=["low"])
    assert random_units["acting"]["low"] == "uniform" and random_units["uniform"] == ["low"]
    assert greedy["goal_success/low"][0] > random_units["goal_success/low"][0] + 0.2


def test_eval_flag_and_an_unknown_layer(runs, capsys):
    full, _, _ = runs
    code, out, _ = cli(capsys, "eval", full, "--episodes", "2", "--uniform", "high", "--json")
    res = json.loads(out)
    assert code == 0 and res["acting"] == {"high": "uniform", "low": "checkpoint"}
    with pytest.raises(ConfigError, match="no layer 'mid'"):
        play(full, episodes=1, uniform=["mid"])
    code, _, err = cli(capsys, "eval", full, "--episodes", "2", "--uniform", "mid")
    assert code != 0 and "no layer 'mid'" in err
