"""Play a finished (or running) training run's team for N episodes and summarise the results."""
from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.errors import ConfigError
from hdppo.runfolder import check_team, load_run_config, resolve_scenario, team_checkpoints, untrained_layers
from hdppo.runtime.goal_books import tally_books
from hdppo.stats import mean_ci, outcome_ci, rate_ci

STANDARD_KEYS = ("team_return", "length", "env")   # with return/LAYER: what every episode record has
EVAL_FILE = "eval.json"

__all__ = ["evaluate", "play", "load_run_config", "team_checkpoints", "outcome_keys", "format_ci", "save_eval"]


def check_playable(run: str | Path, config: dict[str, Any], allow_untrained: bool, checkpoint: str = "latest") -> None:
    """Refuse a run whose trained layer has no checkpoint (it would play uniformly) unless allowed."""
    missing = untrained_layers(run, config, checkpoint)
    if missing and not allow_untrained:
        raise ConfigError(f"run {run} trained layer {missing[0]!r} but holds no checkpoint of it, so it would "
                          f"play scripted or uniformly", "train longer, or pass --allow-untrained to evaluate anyway")


def check_uniform(config: dict[str, Any], uniform: Collection[str]) -> list[str]:
    """The layers to play uniformly at random, each checked to be one of the run's."""
    names = list(config["layer_names"])
    for layer in uniform:
        if layer not in names:
            raise ConfigError(f"--uniform {layer}: the run has no layer {layer!r}",
                              f"name one of its layers: {', '.join(names)}")
    return [name for name in names if name in uniform]


def play(run: str | Path, episodes: int = 20, seed: int = 12345, deterministic: bool = False,
         envs: int = 8, overrides: Mapping[str, str] | None = None, *, trust_run: bool | None = None,
         scenario: str | None = None, checkpoint: str = "latest",
         goal_counts: dict[str, dict[str, list[int]]] | None = None,
         uniform: Collection[str] = ()) -> list[dict[str, Any]]:
    """The per-episode records (returns per layer, length, scenario outcomes) of `episodes` played
    episodes. A `goal_counts` dict is filled with the goals finished while they played, per layer
    whose goals have a success test: {layer: {"all" or goal value: [finished, achieved]}}. The
    layers named in `uniform` act uniformly at random instead of from their checkpoint or script
    (an ablation: a random commander over the trained units)."""
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.worker import Worker, worker_seed
    from hdppo.team.controllers import uniform_policy
    config = load_run_config(run)
    uniform = check_uniform(config, uniform)
    frozen = check_team(run, config, checkpoint)   # every checkpoint checked before a worker builds from it
    frozen = {layer: path for layer, path in frozen.items() if layer not in uniform}
    train = dict(config["train"])
    train.update(seed=seed, envs_per_worker=envs)
    scenario_overrides = dict(config["scenario_overrides"])
    scenario_overrides.update(overrides or {})
    spec = WorkerSpec(resolve_scenario(run, config, trust_run=trust_run, scenario=scenario), scenario_overrides,
                      train, worker_id=0, trained=[],
                      frozen=frozen, deterministic=deterministic)
    worker = Worker(spec, MemoryParams())
    for rt in worker.layers:          # as a layer with neither a checkpoint nor a script plays (Worker)
        if rt.info.name in uniform:
            rt.fixed = uniform_policy(rt.info, worker_seed(seed, 0) + 7 * (rt.info.index + 1))
    books = tally_books(worker.hier) if goal_counts is not None else {}
    done: list[dict] = []
    try:
        limit = 100_000
        while len(done) < episodes and limit > 0:
            result = worker.hier.step(worker._act)
            done.extend(result.episodes)
            limit -= 1
    finally:
        worker.close()
    for layer, book in books.items():
        assert goal_counts is not None
        goal_counts[layer] = {"all": [book.finished_count, book.achieved_count],
                              **{str(g): count for g, count in sorted(book.by_goal.items())}}
    return done[:episodes]


def acting(run: str | Path, config: dict[str, Any], overrides: Mapping[str, str] | None = None, *,
           trust_run: bool | None = None, scenario_path: str | None = None,
           checkpoint: str = "latest", uniform: Collection[str] = ()) -> dict[str, str]:
    """How each layer plays: checkpoint, scripted or uniform."""
    from hdppo.team.scenario import load_scenario
    frozen = team_checkpoints(run, config, checkpoint)
    scenario = load_scenario(resolve_scenario(run, config, trust_run=trust_run, scenario=scenario_path))
    cfg = scenario.make_config({**config["scenario_overrides"], **(overrides or {})})
    return {spec.name: "uniform" if spec.name in uniform else "checkpoint" if spec.name in frozen
            else "scripted" if spec.scripted is not None else "uniform"
            for spec in scenario.build_layers(cfg)}


def evaluate(run: str | Path, episodes: int = 20, seed: int = 12345, deterministic: bool = False,
             envs: int = 8, overrides: Mapping[str, str] | None = None, allow_untrained: bool = True, *,
             trust_run: bool | None = None, scenario: str | None = None, checkpoint: str = "latest",
             uniform: Collection[str] = ()) -> dict[str, Any]:
    """Per-layer returns, episode length and outcomes over `episodes`, each (mean, low, high) at 95%:
    exact binomial intervals for 0/1 outcomes (win, success), bootstrap intervals for the rest;
    the outcomes `goal_success/LAYER` (and, for Discrete goals, `goal_success/LAYER/GOAL`) are the
    share of the goals LAYER's nodes received that they reached, with exact intervals over goals.
    `trust_run` lets the run's own scenario copy run; `scenario` loads that name or file instead of
    the recorded one (hdppo.runfolder.resolve_scenario); `checkpoint` is latest (the newest commit)
    or best (the best evaluation during training, RUN/best); the layers in `uniform` act uniformly
    at random (e.g. the commander, to see what its trained choices add)."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1 (got {episodes})", "pass --episodes 20 (any N >= 1)")
    config = load_run_config(run)
    uniform = check_uniform(config, uniform)
    check_playable(run, config, allow_untrained, checkpoint)
    how = acting(run, config, overrides, trust_run=trust_run, scenario_path=scenario, checkpoint=checkpoint,
                 uniform=uniform)
    goals: dict[str, dict[str, list[int]]] = {}
    done = play(run, episodes, seed, deterministic, envs, overrides, trust_run=trust_run, scenario=scenario,
                checkpoint=checkpoint, goal_counts=goals, uniform=uniform)
    out: dict[str, Any] = {"run": str(run), "checkpoint": checkpoint, "episodes": len(done), "seed": seed,
                           "deterministic": deterministic, "overrides": dict(overrides or {}), "layers": {},
                           "acting": how, "uniform": uniform}
    for layer in config["layer_names"]:
        out["layers"][layer] = mean_ci([e[f"return/{layer}"] for e in done])
    out["team_return"] = mean_ci([e["team_return"] for e in done])
    out["length"] = mean_ci([e["length"] for e in done])
    out["outcomes"] = {}
    for key in outcome_keys(done):      # the scenario's own episode metrics (win, delivery_rate, ...)
        out[key] = out["outcomes"][key] = outcome_ci([e[key] for e in done if key in e])
    out["goals"] = goals                # the goals finished and achieved, per receiving layer and goal value
    for layer, counts in goals.items():
        for goal, (n, ok) in counts.items():
            if n:
                key = f"goal_success/{layer}" + ("" if goal == "all" else f"/{goal}")
                out[key] = out["outcomes"][key] = rate_ci(ok, n)
    return out


def save_eval(run: str | Path, result: dict[str, Any]) -> Path:
    """Write the evaluation next to the run's config (RUN/eval.json), atomically: eval takes no lock
    (it may run beside training, which never touches eval.json), and a reader never sees half a file."""
    import os
    path = Path(run) / EVAL_FILE
    tmp = path.with_name(f".{EVAL_FILE}.{os.getpid()}.part")    # not *.tmp: a resume cleans those
    try:
        tmp.write_text(json.dumps({**result, "written": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


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
