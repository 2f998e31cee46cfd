"""Frozen skills reused elsewhere: a checkpoint loads where its layer's interface matches, and is refused
naming the differing part (observation width, goal feature width, action space) where it does not."""
from __future__ import annotations

import json
import warnings

import pytest

from hdppo.engine.checkpoint import CheckpointError
from hdppo.engine.interface import check_interface, obs_parts
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from tests.helpers.runtime import make_run


def infos(**overrides):
    return RunSpec.from_overrides("grid", {k: str(v) for k, v in overrides.items()}).layer_infos()


@pytest.fixture(scope="module")
def skills(tmp_path_factory):
    """A grid run whose units hold a checkpoint (its meta written as training writes it)."""
    return make_run(tmp_path_factory.mktemp("skills") / "run", "grid", layers=["low"])


def meta_of(run, layer="low"):
    return json.loads((run / "checkpoints" / layer / "meta.json").read_text())["meta"]


def test_checkpoints_record_the_width_of_each_part_of_the_observation(skills):
    low = infos()[-1]
    assert meta_of(skills)["obs_parts"] == obs_parts(low) == {"features": 15, "goal_features": 3}
    mid = infos()[1]
    assert obs_parts(mid) == {"features": 31, "goal_features": 3, "child_features": 15, "child_position": 2}
    assert sum(obs_parts(mid).values()) == mid.obs_dim


def test_units_of_another_map_size_and_team_size_match(skills):
    low = infos(size=9, n_units=6, squad_size=3)[-1]
    assert check_interface(meta_of(skills), low, None, "--load low=x") is None     # accepted: no CheckpointError
    assert meta_of(skills)["obs_parts"] == obs_parts(low)                          # because every part matches


@pytest.mark.parametrize(("change", "words"), [
    ({"n_targets": 5}, ["observation width (own features) 15 in the checkpoint, 18 here"]),
])
def test_units_that_observe_otherwise_are_refused_naming_the_part(skills, change, words):
    with pytest.raises(CheckpointError) as err:
        check_interface(meta_of(skills), infos(**change)[-1], None, "--load low=x")
    for word in words:
        assert word in str(err.value)


def test_another_goal_grounding_or_action_space_is_named(skills):
    meta = dict(meta_of(skills), obs_parts={"features": 15, "goal_features": 4}, action_space="Discrete(6)")
    here = infos()
    with pytest.raises(CheckpointError) as err:
        check_interface(meta, here[-1], here[1].action_space, "--load low=x")
    msg = str(err.value)
    assert "goal feature width 4 in the checkpoint, 3 here (goal space Discrete(4))" in msg
    assert "action space Discrete(6) in the checkpoint, Discrete(5) here" in msg
    assert "observation width" not in msg
    assert msg.rpartition("; ")[2].startswith("load a checkpoint trained where layer 'low'")   # the fix line


def test_a_checkpoint_without_parts_is_compared_on_its_whole_width(skills):
    meta = {k: v for k, v in meta_of(skills).items() if k != "obs_parts"}
    check_interface(meta, infos(size=9)[-1], None, "x")
    with pytest.raises(CheckpointError, match="observation width 18 in the checkpoint, 21 here"):
        check_interface(meta, infos(n_targets=5)[-1], None, "x")


def test_trainer_loads_matching_skills_frozen_and_refuses_others_before_any_folder(skills, tiny, tmp_path):
    ckpt = str(skills / "checkpoints" / "low")
    spec = RunSpec.from_overrides("grid", {**tiny, "steps": 64, "size": 9}, layers=["high", "mid"],
                                  frozen={"low": ckpt}, out=tmp_path / "ok")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Trainer(spec).run()
    assert sorted(p.name for p in (tmp_path / "ok" / "checkpoints").iterdir() if p.is_dir()) == ["high", "mid"]
    assert json.loads((tmp_path / "ok" / "config.json").read_text())["frozen"] == {"low": ckpt}
    bad = RunSpec.from_overrides("grid", {**tiny, "steps": 64, "n_targets": 5}, layers=["high", "mid"],
                                 frozen={"low": ckpt}, out=tmp_path / "bad")
    with pytest.raises(CheckpointError, match="observation width"):
        Trainer(bad)
    assert not (tmp_path / "bad").exists()


def test_train_from_python_loads_a_layer_frozen(tmp_path, tiny):
    """`hdppo.train(..., load={"low": RUN})` is `--load low=RUN`: the units act from that run's
    checkpoint, unchanged, while the layers above train."""
    import hdppo
    from hdppo.runfolder import team_checkpoints
    units = hdppo.train("grid", tiny | {"steps": 320}, layers="low", out=tmp_path / "units")
    run = hdppo.train("grid", tiny | {"steps": 640}, layers=["high", "mid"], out=tmp_path / "top",
                      load={"low": units})
    config = json.loads((run / "config.json").read_text())
    assert config["frozen"] == {"low": str(units / "checkpoints" / "low")}
    assert (run / "checkpoints" / "high" / "meta.json").is_file()
    assert not (run / "checkpoints" / "low" / "meta.json").is_file()       # frozen: not trained, not saved
    assert team_checkpoints(run, config)["low"] == str(units / "checkpoints" / "low")   # what eval and load play
