"""A deployed team (hdppo.load, and its ONNX export) chooses goals under the scenario's goal masks,
as training does (tests/fixtures/goal_masked_grid.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hdppo.runtime.export import export_team
from tests.helpers import TESTS
from tests.helpers.runtime import make_run, team_actions, worker_actions

SCENARIO = str(TESTS / "fixtures" / "goal_masked_grid.py")
STEPS = 90                                   # three 30-step episodes


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("masked") / "run", SCENARIO)


def held_goals(team) -> list[int]:
    return [int(g) for goals in team.hier.goals[1:] for g in np.asarray(goals).reshape(-1)]


def test_the_loaded_team_samples_the_training_paths_goals_and_never_a_masked_one(run):
    import hdppo
    from hdppo.engine.worker import worker_seed
    team = hdppo.load(run, deterministic=False, seed=worker_seed(4, 0))
    held: list[int] = []
    ours = team_actions(run, STEPS, 4, False, team=team, across_episodes=True,
                        after_act=lambda t: held.extend(held_goals(t)))
    assert ours == worker_actions(run, STEPS, seed=4, deterministic=False, across_episodes=True)
    assert set(held) == {1, 2}, "the layers decide at multiples of 4, where targets 0 (t % 4) and 3 are masked"


def test_the_onnx_team_takes_the_torch_teams_actions_under_the_masks(run, tmp_path):
    from hdppo.runtime.onnx_team import OnnxTeam
    export_team(run, tmp_path / "onnx")
    onnx = OnnxTeam(tmp_path / "onnx", deterministic=False, seed=11)
    held: list[int] = []
    theirs = team_actions(run, STEPS, 6, False, team=onnx, across_episodes=True,
                          after_act=lambda t: held.extend(held_goals(t)))
    assert len(theirs) == STEPS and set(held) == {1, 2}
    greedy = OnnxTeam(tmp_path / "onnx", deterministic=True)
    assert team_actions(run, STEPS, 6, team=greedy, across_episodes=True) == team_actions(run, STEPS, 6,
                                                                                          across_episodes=True)


def test_the_manifest_names_the_goal_mask_hook(run, tmp_path):
    import json
    export_team(run, tmp_path / "onnx")
    layers = json.loads((tmp_path / "onnx" / "manifest.json").read_text())["layers"]
    assert [("not_this_step" in (x.get("goal_mask") or "")) for x in layers] == [True, True, False]
    assert "low" == layers[-1]["name"] and "goal_mask" not in layers[-1]
