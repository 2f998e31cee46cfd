"""`hdppo sweep`'s refusals before any trial: a missing optuna, a bad objective, a budget set twice."""
from __future__ import annotations

import sys

import pytest

from tests.helpers.cli import cli


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("lr: {low: 1e-4, high: 1e-2, log: true}\n")
    return path


def test_without_optuna_the_error_names_the_extra(capsys, monkeypatch, space) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)           # `import optuna` raises ImportError
    rc, out, err = cli(capsys, "sweep", "grid", "--space", space, "--trials", "2")
    assert rc == 2 and err == 'hdppo: error: hdppo sweep needs optuna, which is not installed\n' \
                              '  fix: pip install "hdppo[sweep]"\n'


@pytest.mark.parametrize("extra, says", [(["--objective", "best"], "neither return nor eval:METRIC"),
                                         (["--steps", "64", "steps=64"], "--steps and steps= both"),
                                         (["lrr=1"], "unknown setting 'lrr'"),
                                         (["lr=0.1"], "lr is swept and also given as lr=0.1")])
def test_bad_sweeps_are_refused_before_any_trial(capsys, tmp_path, space, extra, says) -> None:
    rc, out, err = cli(capsys, "sweep", "grid", "--space", space, "--trials", "2", "--out", tmp_path / "s", *extra)
    assert rc == 2 and err.startswith("hdppo: error:") and says in err and "\n  fix: " in err
    assert not (tmp_path / "s").exists()


def test_sweep_needs_a_space_and_a_trial_count(capsys) -> None:
    rc, out, err = cli(capsys, "sweep", "grid")
    assert rc == 2 and "--space" in err and "--trials" in err
