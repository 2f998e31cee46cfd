"""Tracking (hdppo/engine/tracking.py) without training: the `track` key and `--track` flag, the
missing-library error, what the MetricsSink forwards (every scope, eval too) and sums up, a failing
tracker reported once, and the config as TensorBoard hparams. Tracked training runs: slow/test_tracking_runs.py."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from hdppo.engine import tracking
from hdppo.engine.config import resolve_overrides
from hdppo.engine.metrics import MetricsSink, read_csv
from hdppo.engine.tracking import Tracker, check_track, flatten
from hdppo.errors import ConfigError
from tests.helpers.cli import cli
from tests.helpers.tracking import hparams

CONFIG = {"scenario": "grid", "train": {"steps": 100, "lr_list": [64, 64], "layers": {"low": {"lr": 0.001}}},
          "frozen": {}, "note": None, "resolved": {"workers": 2}}


class Recorder(Tracker):
    """A tracker that keeps what it gets; `fail_at` makes its n-th log call raise."""

    name = "recorder"
    opened: list[Recorder] = []

    def __init__(self, run_dir: Path, config: dict, fail_at: int | None = None) -> None:
        self.config, self.rows, self.fail_at = config, [], fail_at
        self.summary: dict | None = None
        self.status: str | None = None
        Recorder.opened.append(self)

    def log(self, step, values):
        if self.fail_at is not None and len(self.rows) + 1 >= self.fail_at:
            raise RuntimeError("the tracking server went away\nsecond line")
        self.rows.append((step, values))

    def flush(self):
        pass

    def finish(self, summary, status):
        self.summary, self.status = summary, status


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> type[Recorder]:
    Recorder.opened = []
    monkeypatch.setitem(tracking.BACKENDS, "wandb", Recorder)
    return Recorder


def a_run_folder(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(CONFIG))
    return path


def test_track_defaults_to_none_and_refuses_an_unknown_tracker() -> None:
    tc, _ = resolve_overrides({}, ["low"], set())
    assert tc.track == "none"
    assert resolve_overrides({"track": "MLflow"}, ["low"], set())[0].track == "mlflow"
    with pytest.raises(ConfigError) as err:
        resolve_overrides({"track": "tensorboard"}, ["low"], set())
    assert "'track' is not one of ['none', 'wandb', 'mlflow']" in err.value.problem


@pytest.mark.parametrize("backend", ["wandb", "mlflow"])
def test_a_missing_library_names_its_extra(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.setitem(sys.modules, backend, None)         # `import wandb` fails, find_spec finds nothing
    with pytest.raises(ConfigError) as err:
        check_track(backend)
    assert err.value.problem == f"track={backend} needs the {backend!r} package, which is not installed"
    assert f'pip install "hdppo[{backend}]"' in err.value.fix


def test_the_cli_refuses_a_missing_library_before_making_the_run_folder(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    rc, _, err = cli(capsys, "train", "grid", "--track", "mlflow", "--out", tmp_path / "run")
    assert rc == 2 and not (tmp_path / "run").exists()
    assert err.splitlines()[0] == "hdppo: error: track=mlflow needs the 'mlflow' package, which is not installed"
    assert 'pip install "hdppo[mlflow]"' in err


def test_the_flag_and_the_key_are_one_setting(capsys, tmp_path) -> None:
    rc, _, err = cli(capsys, "train", "grid", "--track", "wandb", "track=mlflow", "--out", tmp_path / "run")
    assert rc == 2 and "--track wandb and track=mlflow both set 'track'" in err
    rc, _, err = cli(capsys, "train", "--resume", tmp_path / "run", "--track", "wandb")
    assert rc == 2 and "--track would be ignored" in err
    rc, _, err = cli(capsys, "train", "grid", "--track", "neptune")
    assert rc == 2 and "invalid choice: 'neptune'" in err


def test_the_summary_takes_the_eval_scope_evaluation_during_training_logs() -> None:
    from hdppo.engine.evaluation import SCOPE
    assert tracking.EVAL_SCOPE == SCOPE


def test_flatten_keeps_scalars_and_writes_lists_as_json() -> None:
    assert flatten(CONFIG) == {"scenario": "grid", "train.steps": 100, "train.lr_list": "[64, 64]",
                               "train.layers.low.lr": 0.001, "resolved.workers": 2}


def test_the_sink_forwards_every_scope_and_sums_up_returns_and_eval(tmp_path, recorder) -> None:
    run = a_run_folder(tmp_path / "run")
    with MetricsSink(run, tensorboard=False, track="wandb") as sink:
        sink.log("run", 8, {"team_return": 1.0, "sps": 50.0, "return/low": 0.5})
        sink.log("low", 8, {"return": 0.5, "loss": math.nan, "kl": 0.1})
        sink.log("low/worker_0", 8, {"sps": 25.0})
        sink.log("eval", 8, {"team_return": 0.25, "win": 0.0})
        sink.log("low", 16, {"return": 0.75, "kl": 0.2})
        sink.log("eval", 16, {"team_return": 0.5, "win": 1.0})
    [opened] = recorder.opened
    assert opened.config == CONFIG                                  # the run's config.json, as written
    assert opened.rows == [(8, {"run/team_return": 1.0, "run/sps": 50.0, "run/return/low": 0.5}),
                           (8, {"low/return": 0.5, "low/kl": 0.1}),            # NaN skipped, as in TensorBoard
                           (8, {"low/worker_0/sps": 25.0}),
                           (8, {"eval/team_return": 0.25, "eval/win": 0.0}),
                           (16, {"low/return": 0.75, "low/kl": 0.2}),
                           (16, {"eval/team_return": 0.5, "eval/win": 1.0})]
    assert opened.summary == {"eval/team_return": 0.5, "eval/win": 1.0, "low/return": 0.75,
                              "run/return/low": 0.5, "run/team_return": 1.0}
    assert opened.status == "FINISHED"


def test_a_run_that_raises_ends_its_tracking_run_failed_or_killed(tmp_path, recorder) -> None:
    class Stopped(Exception):
        signum = 15                              # what the trainer's RunInterrupted carries
    for error, status in ((ValueError("boom"), "FAILED"), (Stopped(), "KILLED"), (KeyboardInterrupt(), "KILLED")):
        with pytest.raises(type(error)), MetricsSink(a_run_folder(tmp_path / status), tensorboard=False,
                                                     track="wandb") as sink:
            sink.log("low", 1, {"return": 1.0})
            raise error
        assert recorder.opened[-1].status == status


def test_a_failing_tracker_is_one_warning_and_the_rows_go_on(tmp_path, monkeypatch, recorder) -> None:
    monkeypatch.setitem(tracking.BACKENDS, "wandb", lambda run_dir, config: Recorder(run_dir, config, fail_at=2))
    run = a_run_folder(tmp_path / "run")
    with pytest.warns(UserWarning) as caught, MetricsSink(run, tensorboard=False, track="wandb") as sink:
        for step in range(1, 6):
            sink.log("low", step, {"return": float(step)})
    [warning] = [w for w in caught if "tracking" in str(w.message)]
    assert str(warning.message) == ("tracking with recorder stopped (RuntimeError: the tracking server went away); "
                                    "training goes on, the run's metrics/*.csv and tb/ keep every row")
    assert recorder.opened[0].rows == [(1, {"low/return": 1.0})] and recorder.opened[0].status is None
    assert len((run / "metrics" / "low.csv").read_text().splitlines()) == 6


def test_a_tracker_that_cannot_start_is_one_warning(tmp_path, monkeypatch) -> None:
    def refuse(run_dir, config):
        raise ConnectionError("no route to host")
    monkeypatch.setitem(tracking.BACKENDS, "mlflow", refuse)
    with pytest.warns(UserWarning, match=r"^tracking with mlflow stopped \(ConnectionError: no route to host\)"):
        sink = MetricsSink(a_run_folder(tmp_path / "run"), tensorboard=False, track="mlflow")
    sink.log("low", 1, {"return": 1.0})
    sink.close()
    assert [r["return"] for r in read_csv(tmp_path / "run", "low")] == [1.0]       # the metrics go on without it


def test_the_config_is_tensorboard_hparams_with_the_summary_as_metrics(tmp_path) -> None:
    run = a_run_folder(tmp_path / "run")
    with MetricsSink(run) as sink:
        sink.log("run", 8, {"team_return": 1.0, "sps": 50.0})
        sink.log("low", 8, {"return": 0.5, "kl": 0.1})
        sink.log("eval", 8, {"win": 1.0})
    read = hparams(run)
    assert read["hparams"] == {"scenario": "grid", "train.steps": 100.0, "train.lr_list": "[64, 64]",
                               "train.layers.low.lr": 0.001, "resolved.workers": 2.0}
    assert read["metrics"] == ["eval/win", "low/return", "run/team_return"]


def test_no_hparams_outside_a_run_folder(tmp_path) -> None:
    with MetricsSink(tmp_path) as sink:
        sink.log("low", 1, {"return": 1.0})
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert acc.Tags()["scalars"] == ["low/return"]
    with pytest.raises(KeyError):
        acc.PluginTagToContent("hparams")
