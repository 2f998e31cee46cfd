"""What a tracked run logged, read back: its CSV cells, its W&B offline run, its TensorBoard hparams."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from hdppo.engine.metrics import read_csv


def csv_cells(run: Path) -> dict[tuple[str, int], float]:
    """Every non-empty metric cell of a run's CSVs as {("scope/key", step): value}."""
    cells = {}
    for path in sorted((run / "metrics").glob("*.csv")):
        scope = path.stem.replace("__", "/")
        for row in read_csv(run, scope):
            for key, value in row.items():
                if key not in ("step", "wall_time") and not math.isnan(value):
                    cells[(f"{scope}/{key}", int(row["step"]))] = value
    return cells


def last_rows(run: Path) -> dict[str, dict[str, float]]:
    """Each scope's last CSV row (without step and wall time)."""
    out = {}
    for path in sorted((run / "metrics").glob("*.csv")):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        out[path.stem.replace("__", "/")] = {k: float(v) for k, v in rows[-1].items()
                                             if k not in ("step", "wall_time") and v}
    return out


def wandb_run(run_dir: Path) -> dict[str, Any]:
    """An offline W&B run folder read back by wandb's own reader (`wandb leet inspect --json`): its
    id, config, history rows, summary (every update, the last value kept) and exit code."""
    lines = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_dir)],
                           capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    out: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "exit_code": None}
    for record in (json.loads(line) for line in lines if line.strip()):
        kind = record.get("type")
        if kind == "run":
            out["id"] = record["run"]["run_id"]
            out["config"] = record["run"]["config"]["update"]
        elif kind == "history":
            out["history"].append(record["history"]["item"])
        elif kind == "summary":
            out["summary"].update(record["summary"]["update"])
        elif kind == "exit":
            out["exit_code"] = record["exit"].get("exit_code", 0)
    return out


def hparams(run: Path) -> dict[str, Any]:
    """The hparams plugin data in RUN/tb, read with TensorBoard's own reader: the session's hparams
    and the experiment's metric tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    acc = EventAccumulator(str(run / "tb"))
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    values = {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    return {"hparams": values, "metrics": sorted(m.name.tag for m in experiment.metric_infos)}
