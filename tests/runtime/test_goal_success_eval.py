"""`hdppo eval` reports goal success per receiving layer and, for Discrete goals, per goal value."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hdppo.runtime.evaluate import evaluate, play
from hdppo.stats import rate_ci
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("goals")
    # nothing trained: grid's units walk to their goal (scripted greedy_low); random: an untrained net
    return make_run(base / "greedy", "grid", layers=[]), make_run(base / "random", "grid", layers=["low"])


def test_success_per_goal_value_adds_up_to_the_layer_s(runs):
    res = evaluate(runs[0], episodes=30)
    for layer in ("mid", "low"):
        counts = res["goals"][layer]
        per_goal = {g: c for g, c in counts.items() if g != "all"}
        assert set(per_goal) == {"0", "1", "2", "3"}                 # uniform goals: every target is given
        assert np.sum(list(per_goal.values()), axis=0).tolist() == counts["all"]
        for goal, (n, ok) in per_goal.items():
            assert res["outcomes"][f"goal_success/{layer}/{goal}"] == rate_ci(ok, n)
        assert res["outcomes"][f"goal_success/{layer}"] == rate_ci(*counts["all"][::-1])


def test_goal_reaching_units_succeed_more_than_random_ones(runs):
    greedy, random = (evaluate(r, episodes=30)["outcomes"] for r in runs)
    for goal in range(4):
        assert greedy[f"goal_success/low/{goal}"][0] > random[f"goal_success/low/{goal}"][0] + 0.2


def test_play_counts_goals_only_when_asked(runs):
    counts: dict = {}
    assert len(play(runs[0], episodes=3, goal_counts=counts)) == 3 and counts["low"]["all"][0] > 0
    assert len(play(runs[0], episodes=3)) == 3


def test_eval_table_and_json_show_goal_success(runs, wide_console, capsys):
    code, out, _ = cli(capsys, "eval", runs[0], "--episodes", "5")
    assert code == 0 and "goal_success/low/2" in out and "goal_success/mid " in out
    code, out, _ = cli(capsys, "eval", runs[0], "--episodes", "5", "--json")
    assert code == 0 and "goal_success/low/0" in json.loads(out)["outcomes"]
