"""Team.act's acting-only path (HierarchyEnv.decide) takes the decisions the training path takes
(HierarchyEnv.step in a Worker, which keeps rewards and transitions) and its ONNX export's: every
action of 400 skirmish steps over several episodes, units dying on the way."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hdppo.runtime.export import export_team
from tests.helpers.runtime import make_run, team_actions, worker_actions

STEPS = 400


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("act") / "run", "skirmish")     # the default 400-step episodes


def _episodes(run: Path, seed: int, deterministic: bool = True, team=None) -> list[dict[str, object]]:
    return team_actions(run, STEPS, seed, deterministic, team=team, across_episodes=True)


@pytest.mark.parametrize("deterministic", [True, False])
def test_every_action_is_the_training_paths(run, deterministic):
    """Greedy and sampled (the team's torch stream is seeded like a worker's), across episode ends."""
    theirs = worker_actions(run, STEPS, seed=5, deterministic=deterministic, across_episodes=True)
    ours = _episodes(run, 5, deterministic)
    assert len(ours) == len(theirs) == STEPS
    assert ours == theirs
    assert sum(len(a) < 12 for a in ours) > 20                          # units died: no action for the dead
    assert any(len(a) < 12 and len(b) == 12 for a, b in itertools.pairwise(ours))   # a new episode revived them


def test_onnx_team_takes_the_torch_teams_actions(run, tmp_path):
    from hdppo.runtime.onnx_team import OnnxTeam
    export_team(run, tmp_path / "onnx")
    torch_actions = _episodes(run, 6)
    onnx_actions = _episodes(run, 6, team=OnnxTeam(tmp_path / "onnx", deterministic=True))
    assert len(onnx_actions) == STEPS
    assert onnx_actions == torch_actions                               # 0 mismatches
    assert onnx_actions != _episodes(run, 7)
