"""What a tracked run logged, read back: its CSV cells, its W&B offline records, its TensorBoard hparams."""
from __future__ import annotations

import csv
import json
import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hdppo.engine.metrics import read_csv

WANDB_BLOCK = 32 * 1024          # the .wandb file is LevelDB's log format: 32 KiB blocks of 7-byte-headed chunks
WANDB_HEADER = 7                 # ":W&B", a 2-byte magic and a version byte


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


def wandb_records(path: Path) -> Iterator[Any]:
    """The records of a `run-ID.wandb` file, decoded with wandb's own protobuf definitions."""
    from wandb.proto import wandb_internal_pb2
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    pos, pending = WANDB_HEADER, b""
    while pos + 7 <= len(data):
        left = WANDB_BLOCK - pos % WANDB_BLOCK
        if left < 7:                                   # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):                             # FULL, or the LAST chunk of a fragmented record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def wandb_run(run_dir: Path) -> dict[str, Any]:
    """An offline W&B run folder read back: its id, config, history rows, summary, exit code."""
    [log] = run_dir.glob("run-*.wandb")
    out: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "exit_code": None}
    for record in wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["id"] = record.run.run_id
            out["config"] = _items(record.run.config.update)
        elif kind == "history":
            out["history"].append(_items(record.history.item))
        elif kind == "summary":
            out["summary"].update(_items(record.summary.update))
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out


def _items(items: Any) -> dict[str, Any]:
    """A record's key/value items (a key is `key`, or `nested_key` written as one path)."""
    return {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}


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
