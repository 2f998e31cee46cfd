"""Play a finished (or running) training run's team for N episodes and summarise the results."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .diagnostics import mean_ci
from .errors import ConfigError
from .params import MemoryParams
from .worker import Worker, WorkerSpec

STANDARD_KEYS = ("team_return", "length", "env")   # with return/LAYER: what every episode record has


def load_run_config(run: str | Path) -> dict[str, Any]:
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


def play(run: str | Path, episodes: int = 20, seed: int = 12345, deterministic: bool = False,
         envs: int = 8) -> list[dict[str, Any]]:
    """The per-episode records (returns per layer, length, scenario outcomes) of `episodes` played episodes."""
    config = load_run_config(run)
    frozen = team_checkpoints(run, config)
    train = dict(config["train"])
    train.update(seed=seed, envs_per_worker=envs)
    spec = WorkerSpec(config["scenario"], config["scenario_overrides"], train, worker_id=0, trained=[],
                      frozen=frozen, deterministic=deterministic)
    worker = Worker(spec, MemoryParams())
    done: list[dict] = []
    try:
        limit = 100_000
        while len(done) < episodes and limit > 0:
            result = worker.hier.step(worker._act)
            done.extend(result.episodes)
            limit -= 1
    finally:
        worker.close()
    return done[:episodes]


def evaluate(run: str | Path, episodes: int = 20, seed: int = 12345, deterministic: bool = False,
             envs: int = 8) -> dict[str, Any]:
    """Per-layer returns, episode length and outcome rates (with 95% bootstrap CIs) over `episodes`."""
    config = load_run_config(run)
    frozen = team_checkpoints(run, config)
    done = play(run, episodes, seed, deterministic, envs)
    out: dict[str, Any] = {"episodes": len(done), "layers": {}, "acting": {}}
    for layer in config["layer_names"]:
        out["layers"][layer] = mean_ci([e[f"return/{layer}"] for e in done])
        out["acting"][layer] = ("checkpoint" if layer in frozen else "scripted/uniform")
    out["team_return"] = mean_ci([e["team_return"] for e in done])
    out["length"] = mean_ci([e["length"] for e in done])
    out["outcomes"] = {}
    for key in outcome_keys(done):      # the scenario's own episode metrics (win, delivery_rate, ...)
        out[key] = out["outcomes"][key] = mean_ci([e[key] for e in done if key in e])
    return out


def outcome_keys(episodes: list[dict[str, Any]]) -> list[str]:
    """Numeric keys of episode records that a scenario's episode_info added, in first-seen order."""
    keys: dict[str, None] = {}
    for e in episodes:
        for k, v in e.items():
            if k not in STANDARD_KEYS and not k.startswith("return/") and isinstance(v, (int, float)):
                keys[k] = None
    return list(keys)


def format_ci(ci: tuple[float, float, float]) -> str:
    mean, lo, hi = ci
    return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]" if np.isfinite(mean) else "-"
