"""`hdppo bench --act`: what a trained skirmish team's `act` costs per env step, torch and ONNX side by side.

The team is a skirmish run folder (`run=PATH`), else a short `hdppo.train("skirmish")` run made
for the bench (3 layers, default settings: the cost follows the shapes, not the weights), exported
with `hdppo export` into a temporary folder. The observations come from real episodes of the
scenario's PettingZoo env played by the torch team (greedy) and recorded; every runtime then
replays the same recorded steps through `reset` / `act`, each `act` timed (wall clock and the
thread's CPU time, which a busy machine's preemption does not inflate) on one thread
(`torch.set_num_threads(threads)`; the ONNX sessions run on one thread). Runtimes and modes are
interleaved and the whole set repeated; each figure of a row is its best (lowest) over the repeats.
The greedy replays also count the actions on which torch and ONNX differ.
"""
from __future__ import annotations

import copy
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TARGET_MS = {"torch": 2.0, "onnx": 1.0}       # issue 24: per env step, median and p95, on one core
MODES = {"greedy": True, "sampled": False}    # mode -> deterministic


@dataclass
class ActBenchConfig:
    run: str = ""                 # a skirmish run folder; empty: train a short one for the bench
    train_steps: int = 4096       # env steps of that run
    steps: int = 1000             # recorded env steps replayed per measurement
    repeats: int = 3              # every row is measured this many times, interleaved; each figure's best kept
    threads: int = 1              # torch.set_num_threads
    seed: int = 0                 # the first recorded episode's seed (then seed + 1, ...)


@dataclass
class Step:
    """One recorded env step: what `act` was given, and whether it opened an episode."""

    observations: dict[str, Any]
    infos: dict[str, Any]
    agents: list[str]
    first: bool


def bench_run(cfg: ActBenchConfig, workdir: Path, log: Callable[[str], None] = print) -> Path:
    """The run folder to measure: cfg.run, else a short skirmish run trained in workdir."""
    if cfg.run:
        return Path(cfg.run)
    import hdppo
    log(f"training a {cfg.train_steps:,}-step skirmish run for the bench...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)          # "few updates": the weights do not matter here
        return hdppo.train("skirmish", {"steps": cfg.train_steps, "workers": 1, "backend": "inline"},
                           out=workdir / "run")


def record(team: Any, steps: int, seed: int) -> list[Step]:
    """`steps` env steps of skirmish episodes (seeds seed, seed + 1, ...) acted by `team`."""
    from hdppo.scenarios.skirmish import SkirmishParallelEnv
    env = SkirmishParallelEnv(team.cfg)
    out: list[Step] = []
    episode = seed
    while len(out) < steps:
        observations, infos = env.reset(seed=episode)
        team.reset()
        episode += 1
        first = True
        while env.agents and len(out) < steps:
            step = Step(copy.deepcopy(observations), copy.deepcopy(infos), list(env.agents), first)
            out.append(step)
            first = False
            observations, _, _, _, infos = env.step(team.act(step.observations, step.infos, agents=step.agents))
    env.close()
    return out


def replay(team: Any, steps: list[Step]) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Each recorded step through team.act: wall and CPU milliseconds per step, and the actions."""
    wall, cpu, actions = np.empty(len(steps)), np.empty(len(steps)), []
    for k, step in enumerate(steps):
        if step.first:
            team.reset()
        w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        acts = team.act(step.observations, step.infos, agents=step.agents)
        cpu[k], wall[k] = time.thread_time_ns() - c0, time.perf_counter_ns() - w0
        actions.append(acts)
    return wall / 1e6, cpu / 1e6, actions


def mismatches(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> int:
    """Unit actions that differ between two replays of the same steps (a unit acting in one only counts)."""
    return sum(len(x.keys() ^ y.keys()) + sum(not np.array_equal(x[u], y[u]) for u in x.keys() & y.keys())
               for x, y in zip(a, b))


def summary(wall: np.ndarray, cpu: np.ndarray) -> dict[str, float]:
    return {"median": float(np.median(wall)), "p95": float(np.percentile(wall, 95)),
            "cpu_median": float(np.median(cpu)), "cpu_p95": float(np.percentile(cpu, 95))}


def teams(run: Path, export: Path, seed: int) -> dict[tuple[str, str], Any]:
    """(runtime, mode) -> a team of the run: torch (hdppo.load) and ONNX (OnnxTeam), greedy and sampled."""
    import hdppo
    from hdppo.runtime.onnx_team import OnnxTeam
    out = {}
    for mode, deterministic in MODES.items():
        out["torch", mode] = hdppo.load(run, deterministic=deterministic, seed=seed)
        out["onnx", mode] = OnnxTeam(export, deterministic=deterministic, seed=seed)
    return out


def run_act_bench(cfg: ActBenchConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (runtime, mode) row over the same recorded steps, interleaved and repeated."""
    import torch

    from hdppo.runtime.export import export_team
    torch.set_num_threads(cfg.threads)
    with tempfile.TemporaryDirectory(prefix="hdppo-bench-act-") as tmp:
        run = bench_run(cfg, Path(tmp), log)
        export_team(run, Path(tmp) / "onnx")
        acting = teams(run, Path(tmp) / "onnx", cfg.seed)
        log(f"recording {cfg.steps:,} env steps of skirmish episodes...")
        steps = record(acting["torch", "greedy"], cfg.steps, cfg.seed)
        rows: dict[tuple[str, str], dict[str, float]] = {}
        greedy: dict[str, list[dict[str, Any]]] = {}
        for k in range(cfg.repeats):
            log(f"replaying, repeat {k + 1}/{cfg.repeats}...")
            for key, team in acting.items():
                wall, cpu, actions = replay(team, steps)
                row = summary(wall, cpu)
                rows[key] = {k: min(v, rows.get(key, row)[k]) for k, v in row.items()}
                if key[1] == "greedy":
                    greedy[key[0]] = actions
    return {"rows": rows, "steps": len(steps), "episodes": sum(s.first for s in steps),
            "mismatches": mismatches(greedy["torch"], greedy["onnx"]), "unit_actions": sum(map(len, greedy["torch"])),
            "run": str(run) if cfg.run else None}


def markdown(r: dict[str, Any], cfg: ActBenchConfig, command: str) -> str:
    lines = [f"Command: `{command}`", "",
             f"Team: {r['run'] or f'a {cfg.train_steps:,}-step skirmish run trained by the bench'} (3 layers, "
             f"12 units); {r['steps']:,} recorded env steps of {r['episodes']} episodes replayed per measurement; "
             f"{cfg.threads} torch thread(s), single-threaded ONNX sessions; each figure the best of {cfg.repeats} "
             f"interleaved repeats. Greedy torch and ONNX actions differ on {r['mismatches']} of "
             f"{r['unit_actions']:,} unit actions.", "",
             "| runtime | mode | median ms | p95 ms | CPU median ms | CPU p95 ms | target ms | median / target "
             "| p95 / target |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (runtime, mode), row in r["rows"].items():
        target = TARGET_MS[runtime]
        lines.append(f"| {runtime} | {mode} | {row['median']:.3f} | {row['p95']:.3f} | {row['cpu_median']:.3f} | "
                     f"{row['cpu_p95']:.3f} | {target:.1f} | {row['median'] / target:.2f} | "
                     f"{row['p95'] / target:.2f} |")
    return "\n".join(lines) + "\n"
