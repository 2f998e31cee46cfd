"""`hdppo sweep` end to end on tiny `grid` trials: a study in DIR/study.db with a run folder per
trial, the best as a command `hdppo train` accepts, a second run continuing the study, an
interrupted trial retried, and a clearly worse trial pruned on its training curve."""
from __future__ import annotations

import json
import shlex

import optuna
from optuna.trial import TrialState

from hdppo.analysis.sweep import distributions, open_study
from hdppo.cli.app import parse
from hdppo.cli.sweep import sweep_from_args
from hdppo.cli.train import train_spec
from tests.helpers.cli import cli

TINY = ["backend=inline", "workers=1", "envs_per_worker=2", "rollout=16", "minibatches=1"]


def study(folder) -> optuna.Study:
    return optuna.load_study(study_name="hdppo-sweep", storage=f"sqlite:///{folder / 'study.db'}")


def command(space, out, trials: int, *extra: str) -> list[str]:
    return ["sweep", "grid", "--space", str(space), "--trials", str(trials), "--out", str(out), "--steps", "320",
            *TINY, *extra]


def test_a_sweep_finishes_prints_a_train_command_and_continues(capsys, tmp_path, wide_console) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("lr: {low: 1e-4, high: 1e-2, log: true}\nepochs: {choices: [1, 2]}\n"
                     "low.ent_coef: {low: 0.0, high: 0.05}\n")
    out = tmp_path / "s"
    rc, stdout, err = cli(capsys, *command(space, out, 3))
    assert rc == 0, err
    trials = study(out).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    for t in trials:                                     # each trial a normal, finished run folder
        run = out / f"trial_{t.number:04d}"
        assert json.loads((run / "state.json").read_text())["finished"] is True
        assert json.loads((run / "config.json").read_text())["train"]["layers"]["mid"]["lr"] == t.params["lr"]
    assert "┃ trial ┃ state" in stdout and stdout.count("│ complete │") == 3

    best = study(out).best_trial
    line = stdout.strip().splitlines()[-1]
    assert line.startswith("hdppo train grid --steps 320 backend=inline") and f"best: trial {best.number}," in stdout
    spec = train_spec(parse(shlex.split(line)[1:]))      # the real parser and resolver take it as it is
    assert spec.train.steps == 320 and spec.train.backend == "inline"
    assert spec.train.layers["high"].lr == best.params["lr"]
    assert spec.train.layers["low"].epochs == best.params["epochs"]
    assert spec.train.layers["low"].ent_coef == best.params["low.ent_coef"]

    rc, stdout, err = cli(capsys, *command(space, out, 4))
    assert rc == 0, err
    assert "3 of 4 trials done, continuing" in stdout
    assert [t.number for t in study(out).trials] == [0, 1, 2, 3]      # continued, not restarted
    rc, stdout, err = cli(capsys, *command(space, out, 4, "lr_decay=true"))
    assert rc == 2 and "holds a sweep with other settings (overrides differ)" in err


def test_an_interrupted_trial_is_failed_and_its_parameters_retried(capsys, tmp_path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("lr: {low: 1e-4, high: 1e-2, log: true}\n")
    out = tmp_path / "s"
    args = command(space, out, 2)
    sweep = sweep_from_args(parse(args))
    stale = open_study(out, sweep).ask(distributions(sweep.space))     # a sweep killed while trial 0 ran
    rc, stdout, err = cli(capsys, *args)
    assert rc == 0, err
    assert "trial(s) 0 were interrupted" in stdout
    trials = study(out).trials
    assert trials[0].state == TrialState.FAIL and "error" not in trials[0].user_attrs      # not counted
    assert trials[1].params == stale.params and trials[1].user_attrs["retry_of"] == 0
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE] * 2


def test_a_clearly_worse_trial_is_pruned_on_its_training_curve(capsys, tmp_path, wide_console) -> None:
    """Step penalty 5 per unit and step drives the commander's return far below the others'."""
    space = tmp_path / "space.yaml"
    space.write_text("step_penalty: {choices: [0.01, 5.0]}\n")
    out = tmp_path / "s"
    args = command(space, out, 4)
    sweep = sweep_from_args(parse(args))
    s = open_study(out, sweep)
    for penalty in (0.01, 0.01, 0.01, 5.0):
        s.enqueue_trial({"step_penalty": penalty})
    rc, stdout, err = cli(capsys, *args)
    assert rc == 0, err
    trials = study(out).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3 + [TrialState.PRUNED]
    pruned = trials[3]
    assert 25 <= pruned.user_attrs["pruned_at"] < 100                  # past the warm-up, before the end
    state = json.loads((out / "trial_0003" / "state.json").read_text())
    assert state["finished"] is False and state["env_steps"] < 320     # stopped early, resumable
    assert "pruned at" in stdout and "│ pruned" in stdout


def test_an_eval_objective_scores_each_trial_by_its_evaluation(capsys, tmp_path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("lr: {low: 1e-4, high: 1e-2, log: true}\n")
    out = tmp_path / "s"
    rc, stdout, err = cli(capsys, *command(space, out, 1, "--objective", "eval:team_return", "--eval-episodes", "4"))
    assert rc == 0, err
    saved = json.loads((out / "trial_0000" / "eval.json").read_text())
    assert study(out).trials[0].value == saved["team_return"][0] and saved["episodes"] == 4

    rc, stdout, err = cli(capsys, *command(space, tmp_path / "t", 1, "--objective", "eval:nosuch"))
    assert rc == 2 and "the evaluation has no metric 'nosuch'" in err and "team_return" in err
    trial = study(tmp_path / "t").trials[0]              # a problem of the sweep, not of the trial: retried
    assert trial.state == TrialState.FAIL and "error" not in trial.user_attrs
