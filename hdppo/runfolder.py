"""Run folders as the tools after training read them: config, scenario source, checkpoints per layer."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from hdppo.errors import ConfigError

SCENARIO_COPY = "scenario.py"            # a path scenario's file, copied into the run folder
SCENARIO_SOURCE = "scenario_source.json"  # its absolute path and sha256 at train start


def load_run_config(run: str | Path) -> dict[str, Any]:
    """The run's config.json, or a ConfigError naming the folder."""
    path = Path(run) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{run} is not an hdppo run folder (no config.json)",
                          "pass the --out folder of a `hdppo train` run")
    return json.loads(path.read_text())


def team_checkpoints(run: str | Path, config: dict[str, Any]) -> dict[str, str]:
    """Checkpoint folder per layer that acts from one: the run's own, else the one it loaded frozen."""
    frozen = dict(config.get("frozen", {}))
    for layer in config["layer_names"]:
        ckpt = Path(run) / "checkpoints" / layer
        if (ckpt / "meta.json").is_file():
            frozen[layer] = str(ckpt)
    return frozen


def untrained_layers(run: str | Path, config: dict[str, Any]) -> list[str]:
    """Layers the run trained that have no checkpoint yet (the run stopped before its first save)."""
    have = team_checkpoints(run, config)
    return [layer for layer in config.get("layers", []) if layer not in have]


def _is_path(scenario: str) -> bool:
    return scenario.endswith(".py") or "/" in scenario or "\\" in scenario


def record_scenario(run: str | Path, scenario: str) -> None:
    """Keep a path scenario usable from anywhere: copy the file into the run folder and record its
    absolute path and sha256 (built-in names need nothing)."""
    if not _is_path(scenario):
        return
    src = Path(scenario).resolve()
    if not src.is_file():
        return
    run = Path(run)
    shutil.copyfile(src, run / SCENARIO_COPY)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    (run / SCENARIO_SOURCE).write_text(json.dumps({"path": str(src), "sha256": digest}, indent=2))


def resolve_scenario(run: str | Path, config: dict[str, Any]) -> str:
    """What load_scenario should load for this run: a built-in name, the recorded original file if it
    is unchanged, else the copy in the run folder, else the path as written at train time."""
    scenario = config["scenario"]
    if not _is_path(scenario):
        return scenario
    run = Path(run)
    record = run / SCENARIO_SOURCE
    if record.is_file():
        info = json.loads(record.read_text())
        src = Path(info["path"])
        if src.is_file() and hashlib.sha256(src.read_bytes()).hexdigest() == info["sha256"]:
            return str(src)      # the original (it may import files next to it)
    if (run / SCENARIO_COPY).is_file():
        return str(run / SCENARIO_COPY)
    if Path(scenario).is_file():
        return scenario
    raise ConfigError(f"run {run} was trained on scenario file {scenario}, which is not found from here "
                      f"and the run folder holds no copy of it",
                      f"run from the directory you trained in, or copy the file to {run / SCENARIO_COPY}")


def record_resolved(run: str | Path, **values: Any) -> None:
    """Add what the trainer resolved at start (e.g. workers=0 -> the real count) to config.json's "resolved"."""
    path = Path(run) / "config.json"
    config = json.loads(path.read_text())
    config.setdefault("resolved", {}).update(values)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2, default=str))
    tmp.replace(path)


def checkpoint_arg(path: str | Path, layer: str) -> str:
    """A --load value as a checkpoint folder: a run folder becomes RUN/checkpoints/LAYER."""
    p = Path(path)
    if (p / "meta.json").is_file() or not (p / "config.json").is_file():
        return str(p)
    ckpt = p / "checkpoints" / layer
    if not (ckpt / "meta.json").is_file():
        raise ConfigError(f"run {p} has no checkpoint for layer {layer!r}",
                          f"train that layer in {p} first, or point --load {layer}= at a checkpoint folder")
    return str(ckpt)
