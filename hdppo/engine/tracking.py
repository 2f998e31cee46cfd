"""Experiment tracking: the rows the MetricsSink writes, sent on to W&B or MLflow as well.

`track=wandb` or `track=mlflow` (a training key, `--track` on `hdppo train`) opens one tracking run
per run folder, kept in the folder by default: W&B offline under `RUN/wandb`, MLflow in the SQLite
store `RUN/mlflow/mlflow.db` with its artifacts beside it. The libraries' own environment variables
(`WANDB_MODE`, `WANDB_DIR`, `WANDB_PROJECT`, `MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME`, ...)
point them elsewhere. Each library is an optional extra, imported only by a run that tracks with it.

The tracker gets the run's config.json at start, every metric row (tag `"{scope}/{key}"` at the
row's env step, as in TensorBoard), and at the end a summary: the latest value of every scope's
returns and the last row of the `eval` scope. `RUN/tracking.json` keeps the tracking run's id, so
`--resume` continues the same run. A tracker that fails is reported in one line and dropped; the
run trains on, and the CSVs and TensorBoard keep every row.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hdppo.errors import ConfigError

TRACKERS = ("none", "wandb", "mlflow")
STATE_FILE = "tracking.json"            # RUN/tracking.json: {backend: its run id}
EVAL_SCOPE = "eval"                     # evaluation.py's SCOPE: its last row is the final evaluation
_MODULE = {"wandb": "wandb", "mlflow": "mlflow"}     # what each backend imports
_T = TypeVar("_T")


def check_track(value: Any) -> str:
    """`track` as one of TRACKERS, its library importable; a ConfigError with the fix otherwise."""
    text = str(value).strip().lower()
    if text not in TRACKERS:
        raise ConfigError(f"value {value!r} for 'track' is not one of {list(TRACKERS)}",
                          "pass track=wandb or track=mlflow (--track on `hdppo train`), or track=none")
    if text != "none" and importlib.util.find_spec(_MODULE[text]) is None:
        raise ConfigError(f"track={text} needs the {_MODULE[text]!r} package, which is not installed",
                          f'pip install "hdppo[{text}]", or pass track=none')
    return text


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """Nested dicts as dotted keys (`train.layers.low.lr`); lists as JSON text; None left out."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        elif value is not None:
            flat[name] = json.dumps(value, default=str)
    return flat


def read_config(run_dir: Path) -> dict[str, Any]:
    """RUN/config.json as the trainer wrote it ("resolved" included), or {} outside a run folder."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def is_return(key: str) -> bool:
    """A return column: a layer's `return`, the run's `team_return` or `return/LAYER`."""
    return key == "return" or key.startswith("return/") or key.endswith("_return")


class Tracker(ABC):
    """One tracking run: gets tagged scalars at env steps, then a summary and an end status."""

    name = ""

    @abstractmethod
    def log(self, step: int, values: dict[str, float]) -> None:
        """Scalars tagged `"{scope}/{key}"` at env step `step` (no NaN)."""

    @abstractmethod
    def flush(self) -> None:
        """Send what is buffered (the sink calls it at each commit)."""

    @abstractmethod
    def finish(self, summary: dict[str, float], status: str) -> None:
        """The run's summary, then end it as "FINISHED", "FAILED" or "KILLED"."""


def _saved_ids(run_dir: Path) -> dict[str, str]:
    try:
        ids = json.loads((run_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in ids.items()} if isinstance(ids, dict) else {}


def _save_id(run_dir: Path, backend: str, run_id: str) -> None:
    ids = dict(_saved_ids(run_dir), **{backend: run_id})
    tmp = run_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(ids, indent=2))
    tmp.replace(run_dir / STATE_FILE)


class WandbTracker(Tracker):
    """W&B, offline in RUN/wandb unless WANDB_MODE / WANDB_DIR say otherwise; x axis `env_step`."""

    name = "wandb"

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import wandb
        run_id = _saved_ids(run_dir).get(self.name)
        settings = wandb.Settings(console="off", silent=True, disable_git=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "hdppo"), name=run_dir.name,
                              group=config.get("scenario_name"), job_type="train", config=config,
                              dir=os.environ.get("WANDB_DIR", str(run_dir)),
                              mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
                              id=run_id, resume="allow" if run_id else None, settings=settings)
        self.run.define_metric("env_step")
        self.run.define_metric("*", step_metric="env_step")
        if run_id is None:
            _save_id(run_dir, self.name, self.run.id)

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log({"env_step": step, **values})

    def flush(self) -> None:
        """Nothing: wandb.log hands each row to wandb's own service process at once."""

    def finish(self, summary: dict[str, float], status: str) -> None:
        self.run.summary.update(summary)
        self.run.finish(exit_code=0 if status == "FINISHED" else 1)


class MlflowTracker(Tracker):
    """MLflow, in the SQLite store RUN/mlflow/mlflow.db unless MLFLOW_TRACKING_URI says otherwise."""

    name = "mlflow"
    BATCH = 1000                        # metrics per log_batch call, MLflow's limit

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import logging

        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)   # "Creating initial tables..."
        local = not os.environ.get("MLFLOW_TRACKING_URI")
        store = (run_dir / "mlflow").resolve()
        if local:
            store.mkdir(exist_ok=True)
        self.client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}" if local else None)
        self.pending: list[Any] = []
        self.sending: list[Any] = []          # mlflow's RunOperations of the batches in flight
        run_id = _saved_ids(run_dir).get(self.name)
        if run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "hdppo")
            found = self.client.get_experiment_by_name(name)
            experiment = found.experiment_id if found else self.client.create_experiment(
                name, artifact_location=(store / "artifacts").as_uri() if local else None)
            run = self.client.create_run(experiment, run_name=run_dir.name,
                                         tags={"scenario": str(config.get("scenario_name", "")),
                                               "run_dir": str(run_dir.resolve())})
            run_id = run.info.run_id
            _save_id(run_dir, self.name, run_id)
            logged: dict[str, str] = {}
        else:
            self.client.update_run(run_id, status="RUNNING")
            logged = self.client.get_run(run_id).data.params
        self.run_id = run_id
        params = [Param(k, str(v)[:6000]) for k, v in flatten(config).items() if k not in logged]  # params never change
        for i in range(0, len(params), 100):
            self.client.log_batch(run_id, params=params[i:i + 100])
        self.client.log_dict(run_id, config, "config.json")

    def log(self, step: int, values: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.pending += [Metric(k, v, now, step) for k, v in values.items()]
        if len(self.pending) >= self.BATCH:
            self._send()

    def _send(self) -> None:
        """The pending metrics to MLflow's own logging thread, so the store's writes overlap training."""
        while self.pending:
            batch, self.pending = self.pending[:self.BATCH], self.pending[self.BATCH:]
            self.sending.append(self.client.log_batch(self.run_id, metrics=batch, synchronous=False))

    def flush(self) -> None:
        """Send what is pending and wait until the store has it (raising what it refused)."""
        self._send()
        sending, self.sending = self.sending, []
        for operations in sending:
            if operations is not None:
                operations.wait()

    def finish(self, summary: dict[str, float], status: str) -> None:
        self.flush()
        self.client.log_dict(self.run_id, summary, "summary.json")
        self.client.set_terminated(self.run_id, status)


# each opens its tracking run, or continues the one RUN/tracking.json names
BACKENDS: dict[str, Callable[[Path, dict[str, Any]], Tracker]] = {"wandb": WandbTracker, "mlflow": MlflowTracker}


class RunTracking:
    """What the MetricsSink forwards: every row to the tracker (if any), and each scope's latest row
    kept for the summary. The first error of the tracker is one warning; the tracker is then dropped."""

    def __init__(self, run_dir: Path, track: str = "none") -> None:
        self.config = read_config(run_dir)
        self.latest: dict[str, dict[str, float]] = {}
        self.tracker: Tracker | None = None
        if track != "none":
            self.tracker = self._guard(track, lambda: BACKENDS[track](run_dir, self.config))

    def _guard(self, name: str, call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        except Exception as exc:
            self.tracker = None
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            warnings.warn(f"tracking with {name} stopped ({type(exc).__name__}: {text}); training goes on, "
                          "the run's metrics/*.csv and tb/ keep every row", stacklevel=4)
            return None

    def log(self, scope: str, step: int, values: dict[str, float]) -> None:
        self.latest[scope] = values
        tracker = self.tracker
        if tracker is not None:
            tagged = {f"{scope}/{k}": v for k, v in values.items() if not math.isnan(v)}
            self._guard(tracker.name, lambda: tracker.log(step, tagged))

    def flush(self) -> None:
        tracker = self.tracker
        if tracker is not None:
            self._guard(tracker.name, tracker.flush)

    def summary(self) -> dict[str, float]:
        """Each scope's latest returns and the `eval` scope's last row, tagged `"{scope}/{key}"`."""
        out = {f"{scope}/{k}": v for scope, row in self.latest.items() for k, v in row.items()
               if (scope == EVAL_SCOPE or is_return(k)) and not math.isnan(v)}
        return dict(sorted(out.items()))

    def close(self, status: str) -> None:
        tracker, summary = self.tracker, self.summary()
        if tracker is not None:
            self._guard(tracker.name, lambda: tracker.finish(summary, status))
        self.tracker = None


def write_hparams(writer: Any, config: dict[str, Any], metrics: dict[str, float]) -> None:
    """The flattened config as TensorBoard hparams (its HParams tab) with the summary's tags as its
    metrics, into `writer`'s own folder, next to the scalars those tags name."""
    from torch.utils.tensorboard.summary import hparams
    for event in hparams(flatten(config), metrics):
        writer.file_writer.add_summary(event)
