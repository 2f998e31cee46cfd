"""`hdppo train SCENARIO --skills`: the units alone, on their goal reward, under goal-sampling layers."""
from __future__ import annotations

import json

import pytest

from hdppo.cli import parse
from hdppo.cli.train import train_spec
from hdppo.errors import ConfigError
from tests.helpers import TESTS, TINY_CLI
from tests.helpers.cli import cli


def spec(*argv: str):
    return train_spec(parse(["train", *argv]))


def test_skills_train_the_bottom_layer_on_its_goal_reward_alone():
    s = spec("grid", "--skills")
    assert s.layers == ["low"]
    cfg = s.resolve().config
    assert cfg.w_ext == {"low": 0.0} and cfg.w_int == {"low": 1.0}
    low = s.resolve().scenario.build_layers(cfg)[-1]
    assert (low.w_ext, low.w_int) == (0.0, 1.0)
    assert spec("grid").layers == ["high", "mid", "low"] and spec("grid").resolve().config.w_int == {}


def test_weights_given_on_the_command_line_win():
    cfg = spec("grid", "--skills", "w_ext.low=0.1", "w_int.low=2").resolve().config
    assert cfg.w_ext == {"low": 0.1} and cfg.w_int == {"low": 2.0}


@pytest.mark.parametrize(("argv", "words"), [
    (["grid", "--skills", "layers=1"], ["one layer", "layers above the units"]),
    (["grid", "--skills", "--layer", "mid"], ["--skills trains the bottom layer 'low'", "--layer low"]),
    ([str(TESTS / "scenarios_ok" / "reference_pair.py"), "--skills"], ["has no intrinsic reward",
                                                                        "intrinsic(ctx)"]),
])
def test_skills_are_refused_where_there_is_nothing_to_learn(argv, words):
    with pytest.raises(ConfigError) as err:
        spec(*argv)
    for word in words:
        assert word in err.value.message()


def test_skills_do_not_go_with_resume(tmp_path, capsys):
    rc, _, err = cli(capsys, "train", "--resume", tmp_path, "--skills")
    assert rc == 2 and "--skills" in err


def test_a_skill_run_trains_only_the_units_and_eval_reports_success_per_goal(tmp_path, capsys):
    out = tmp_path / "skills"
    rc, _, err = cli(capsys, "train", "grid", "--skills", "--steps", "64", *TINY_CLI, "--out", out)
    assert rc == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["layers"] == ["low"] and config["scenario_overrides"]["w_ext.low"] == 0.0
    rc, text, err = cli(capsys, "eval", out, "--episodes", "4", "--json")
    assert rc == 0, err
    res = json.loads(text)
    assert res["acting"] == {"high": "uniform", "mid": "uniform", "low": "checkpoint"}
    assert {f"goal_success/low/{g}" for g in range(4)} <= set(res["outcomes"])


def test_a_seed_of_a_skill_group_resumes_without_the_flag(tmp_path, capsys):
    """`--seeds` continues an unfinished seed with --resume, which refuses flags it would ignore."""
    import argparse

    from hdppo.cli.seeds import RESUME_RESET
    from hdppo.cli.train import resume_spec
    run = tmp_path / "seed_0"
    rc, _, err = cli(capsys, "train", "grid", "--skills", "--steps", "32", *TINY_CLI, "--out", run)
    assert rc == 0, err
    one = argparse.Namespace(**vars(parse(["train", "grid", "--skills", "--seeds", "0-1"])))
    vars(one).update(RESUME_RESET, resume=str(run))
    assert resume_spec(one).layers == ["low"]
