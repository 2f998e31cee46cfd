"""Tracked training runs, read back from what each library wrote in the run folder: MLflow's SQLite
store (metric by metric and step, the CSV rows; params, the config; the summary) and W&B's offline
run (history rows, evaluation during training's included; config; summary), each continued by
--resume; a store named by MLFLOW_TRACKING_URI; a tracker that fails mid-run does not stop training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import hdppo
from hdppo.engine import tracking
from hdppo.engine.metrics import MetricsSink
from hdppo.engine.tracking import flatten, is_return
from hdppo.runfolder import check_team, load_run_config
from tests.helpers.cli import cli
from tests.helpers.tracking import csv_cells, hparams, last_rows, wandb_run

TRACKING_VARS = ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_API_KEY", "MLFLOW_TRACKING_URI",
                 "MLFLOW_EXPERIMENT_NAME")


@pytest.fixture(autouse=True)
def own_tracking_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The defaults (offline, in the run folder), and W&B's own settings and caches under tmp_path."""
    for var in TRACKING_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home" / var.lower()))


def expected_summary(run: Path) -> dict[str, float]:
    """Each scope's last returns and the eval scope's last row, from the CSVs."""
    return {f"{scope}/{k}": v for scope, row in last_rows(run).items() for k, v in row.items()
            if scope == "eval" or is_return(k)}


def mlflow_logged(run: Path, uri: str | None = None):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri or f"sqlite:///{run / 'mlflow' / 'mlflow.db'}")
    run_id = json.loads((run / "tracking.json").read_text())["mlflow"]
    got = client.get_run(run_id)
    metrics = {(key, m.step): m.value for key in got.data.metrics for m in client.get_metric_history(run_id, key)}
    return client, got, metrics


def test_mlflow_holds_the_csv_rows_the_config_and_the_summary_and_resume_continues_it(tmp_path, tiny, capsys):
    run = hdppo.train("grid", {**tiny, "steps": 1000, "track": "mlflow"}, out=tmp_path / "run")
    client, got, metrics = mlflow_logged(run)
    config = load_run_config(run)
    assert got.info.status == "FINISHED" and got.info.run_name == "run"
    assert got.data.params == {k: str(v) for k, v in flatten(config).items()}
    assert "resolved.workers" in got.data.params and got.data.params["train.track"] == "mlflow"
    assert metrics == csv_cells(run)                       # every cell of every scope, at its env step
    artifacts = run / "mlflow" / "artifacts" / got.info.run_id / "artifacts"
    assert json.loads((artifacts / "config.json").read_text()) == config
    summary = json.loads((artifacts / "summary.json").read_text())
    assert summary == expected_summary(run) and "low/return" in summary and "run/team_return" in summary
    assert hparams(run)["metrics"] == sorted(summary)

    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", 2000)
    assert rc == 0, err
    client, again, metrics = mlflow_logged(run)
    assert again.info.run_id == got.info.run_id and again.info.status == "FINISHED"
    assert metrics == csv_cells(run) and max(step for _, step in metrics) >= 2000
    assert again.data.params["train.steps"] == "1000"      # MLflow params never change; config.json says 2000
    assert json.loads((artifacts / "config.json").read_text())["train"]["steps"] == 2000


def test_wandb_offline_holds_the_csv_rows_the_config_and_the_summary_and_resume_continues_it(tmp_path, tiny, capsys):
    settings = {**tiny, "steps": 1000, "track": "wandb", "eval_every": 500, "eval_episodes": 2}
    run = hdppo.train("grid", settings, out=tmp_path / "run")
    [folder] = (run / "wandb").glob("offline-run-*")
    logged = wandb_run(folder)
    assert logged["id"] == json.loads((run / "tracking.json").read_text())["wandb"] and logged["exit_code"] == 0
    assert {k: v for k, v in logged["config"].items() if k != "_wandb"} == load_run_config(run)

    def history(*runs):
        return {(k, row["env_step"]): v for r in runs for row in r["history"] for k, v in row.items()
                if not k.startswith("_") and k != "env_step"}
    assert history(logged) == csv_cells(run)
    summary = expected_summary(run)
    assert {k: logged["summary"][k] for k in summary} == summary and "low/return" in summary
    assert {k for k in summary if k.startswith("eval/")} == {f"eval/{k}" for k in last_rows(run)["eval"]}

    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", 2000)
    assert rc == 0, err
    first, second = (wandb_run(f) for f in sorted((run / "wandb").glob("offline-run-*")))
    assert second["id"] == first["id"] and second["exit_code"] == 0      # `wandb sync` uploads both as one run
    assert history(first, second) == csv_cells(run)
    assert {k: second["summary"][k] for k in summary} == expected_summary(run)


def test_mlflow_tracking_uri_points_runs_at_one_store(tmp_path, monkeypatch):
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.chdir(tmp_path)                  # MLflow's own default for the artifacts of such a store: ./mlruns
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "grid-sweep")
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"scenario": "grid", "train": {"seed": name}}))
        with MetricsSink(run, tensorboard=False, track="mlflow") as sink:
            sink.log("low", 32, {"return": 1.0})
        assert not (run / "mlflow").exists() and (tmp_path / "mlruns").is_dir()
    from mlflow.tracking import MlflowClient
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("grid-sweep").experiment_id])
    assert sorted((r.info.run_name, r.data.params["train.seed"], r.data.metrics["low/return"]) for r in runs) == \
        [("a", "a", 1.0), ("b", "b", 1.0)]


def test_a_tracker_failing_mid_run_is_one_warning_and_training_finishes(tmp_path, tiny, monkeypatch):
    calls = []

    def fail_on_the_third(self, step, values):
        calls.append(step)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(tracking.WandbTracker, "log", fail_on_the_third)
    with pytest.warns(UserWarning) as caught:
        run = hdppo.train("grid", {**tiny, "steps": 1000, "track": "wandb"}, out=tmp_path / "run")
    assert [str(w.message) for w in caught if "tracking" in str(w.message)] == [
        "tracking with wandb stopped (OSError: [Errno 28] No space left on device); training goes on, the run's "
        "metrics/*.csv and tb/ keep every row"]
    assert len(calls) == 3                                 # dropped after its error, not called again
    state = json.loads((run / "state.json").read_text())
    assert state["finished"] and state["env_steps"] >= 1000
    assert check_team(run, load_run_config(run)).keys() == {"high", "mid", "low"}
    assert max(step for _, step in csv_cells(run)) >= 1000
