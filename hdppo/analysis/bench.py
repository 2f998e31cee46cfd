"""`hdppo bench`: throughput on `spread`, measured side by side in one run, printed as ratios.

Rows: raw env steps/s with random actions (MPE2 and hdppo's numpy port), hdppo rollout-only
steps/s (hierarchy + policies, no learning), hdppo training steps/s for a flat (1-layer) and the
3-layer team on both env implementations, and RLlib PPO training on MPE2 with the same batch
settings. One env step = every agent of one env copy acts once. Every PPO setting (epochs,
minibatches, target_kl, ...) is `LayerConfig`'s default. The learner rows (what an update costs,
on spread and VMAS balance) are `hdppo.analysis.bench_learner`'s.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class BenchConfig:
    n_agents: int = 6
    max_cycles: int = 50
    workers: int = 2
    envs_per_worker: int = 32
    rollout: int = 64                 # env steps per copy between low-layer updates
    train_steps: int = 100_000        # env steps per native training run (mpe2 runs use a fifth)
    seconds: float = 5.0              # per raw / rollout measurement
    rllib_iterations: int = 3
    rllib: bool = True
    repeats: int = 2                  # native rows are measured this many times, interleaved; best kept
    updates: int = 3                  # learner rows: updates per training run
    tasks: str = "spread,balance"     # learner rows: the tasks measured
    compile_bare: bool = False        # learner rows: also time the bare loop with its loss under torch.compile


def _time_loop(step, seconds: float) -> tuple[int, float]:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        n += step()
    return n, time.perf_counter() - t0


def raw_mpe2(cfg: BenchConfig) -> float:
    """MPE2 simple_spread, one process, random actions."""
    from mpe2 import simple_spread_v3
    env = simple_spread_v3.parallel_env(N=cfg.n_agents, max_cycles=cfg.max_cycles, continuous_actions=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step() -> int:
        if not env.agents:
            env.reset()
        env.step({a: int(rng.integers(5)) for a in env.agents})
        return 1
    n, dt = _time_loop(step, cfg.seconds)
    return n / dt


def raw_native(cfg: BenchConfig) -> float:
    """hdppo's numpy port of simple_spread, `envs_per_worker` copies in one process, random actions."""
    from hdppo.scenarios.spread.sim import SpreadBatch
    env = SpreadBatch(cfg.n_agents, 0.5, cfg.max_cycles, cfg.envs_per_worker, 0)
    env.reset(0)
    rng = np.random.default_rng(0)

    def step() -> int:
        out = env.step(rng.integers(5, size=(cfg.envs_per_worker, cfg.n_agents)))
        if out.done.any():
            env.reset_done(out.done)
        return cfg.envs_per_worker
    n, dt = _time_loop(step, cfg.seconds)
    return n / dt


def _train_config(cfg: BenchConfig, layers: int, native: bool, workers: int) -> tuple[dict, dict]:
    # the rollout sets the units' update batch; upper layers keep their default cadence (LayerConfig.rollout_steps)
    train = {"workers": str(workers), "envs_per_worker": str(cfg.envs_per_worker), "low.rollout": str(cfg.rollout),
             "progress": "false", "log_every": "1000"}
    scenario = {"layers": layers, "native": native, "n_agents": cfg.n_agents, "max_cycles": cfg.max_cycles}
    return train, scenario


def rollout_only(cfg: BenchConfig, layers: int, native: bool) -> float:
    """One worker stepping the hierarchy with every layer's policy (no learning)."""
    from hdppo.engine.config import resolve_overrides, train_config_to_dict
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.server import ParameterServer
    from hdppo.engine.worker import Worker
    from hdppo.team.scenario import load_scenario
    train, scenario = _train_config(cfg, layers, native, 1)
    sc = load_scenario("spread")
    names = [s.name for s in sc.build_layers(sc.make_config(scenario))]
    tc, _ = resolve_overrides(train, names, set())
    params = MemoryParams()
    w = Worker(WorkerSpec("spread", scenario, train_config_to_dict(tc), 0, names), params)
    for rt in w.layers:
        params.publish(rt.info.name, 0, 0.01, ParameterServer(rt.info, rt.lc, 0).params())
    w.pull()
    w._decide()                         # as `collect` steps: decide, step, record, decide the next step

    def step() -> int:
        w._record(w._env_step())
        w._decide()
        for rt in w.layers:             # drop the data: this row measures acting only
            if rt.buffer.env_steps >= 256:
                rt.buffer.take(0.95, None)
        return w.hier.n_envs
    n, dt = _time_loop(step, cfg.seconds)
    w.close()
    return n / dt


def training(cfg: BenchConfig, layers: int, native: bool, steps: int) -> float:
    """Full training (process backend): env steps per second of the DPPO loop, start-up excluded."""
    from hdppo.engine.config import resolve_overrides
    from hdppo.engine.spec import RunSpec
    from hdppo.engine.trainer import Trainer
    from hdppo.team.scenario import load_scenario
    train, scenario = _train_config(cfg, layers, native, cfg.workers)
    train["steps"] = str(steps)
    train["backend"] = "process"
    sc = load_scenario("spread")
    names = [s.name for s in sc.build_layers(sc.make_config(scenario))]
    tc, _ = resolve_overrides(train, names, set())
    out = Path(tempfile.mkdtemp(prefix="hdppo-bench-"))
    try:
        summary = Trainer(RunSpec("spread", scenario, tc, names, {}, out / "run")).run()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    info = next(iter(summary.values()))
    return info["env_steps"] / info["seconds"]


def rllib(cfg: BenchConfig) -> dict[str, Any]:
    from hdppo.analysis.bench_rllib import rllib_ppo_steps_per_second
    from hdppo.engine.config import LayerConfig
    batch = cfg.rollout * cfg.envs_per_worker * cfg.workers
    lc = LayerConfig()
    # RLlib's minibatch counts agent rows but may not exceed the batch counted in env steps, so
    # hdppo's minibatch (batch x agents / minibatches rows) is capped at `batch` rows. RLlib runs
    # all num_epochs (no target_kl early stop).
    return rllib_ppo_steps_per_second(
        n_agents=cfg.n_agents, max_cycles=cfg.max_cycles, train_batch_size=batch,
        minibatch_size=min(batch * cfg.n_agents // lc.minibatches, batch), num_epochs=lc.epochs,
        num_env_runners=cfg.workers, iterations=cfg.rllib_iterations, warmup_iterations=1)


def run_benchmark(cfg: BenchConfig, log=print) -> dict[str, Any]:
    """Every row, measured in this order in this process; returns rates and the target ratios."""
    r: dict[str, Any] = {}
    log("raw env rates...")
    r["raw_mpe2"] = raw_mpe2(cfg)
    r["raw_native"] = raw_native(cfg)
    log("rollout-only rates...")
    for native in (False, True):
        for _ in range(cfg.repeats if native else 1):
            for layers in (1, 3):
                key = f"rollout_{'native' if native else 'mpe2'}_{layers}"
                r[key] = max(r.get(key, 0.0), rollout_only(cfg, layers, native))
    log("training rates...")
    for native in (True, False):
        steps = cfg.train_steps if native else max(cfg.train_steps // 5, 10_000)
        for _ in range(cfg.repeats if native else 1):
            for layers in (1, 3):
                key = f"train_{'native' if native else 'mpe2'}_{layers}"
                r[key] = max(r.get(key, 0.0), training(cfg, layers, native, steps))
    if cfg.rllib:
        log("RLlib PPO...")
        try:
            r["rllib"] = rllib(cfg)["env_steps_per_s"]
        except Exception as exc:  # keep the hdppo rows; say why the reference is missing
            log(f"RLlib PPO failed: {type(exc).__name__}: {exc}")
    r["ratios"] = ratios(r, cfg)
    return r


def ratios(r: dict[str, Any], cfg: BenchConfig) -> dict[str, float]:
    out = {
        "3-layer / flat (native)": r["train_native_3"] / r["train_native_1"],
        "3-layer / flat (mpe2)": r["train_mpe2_3"] / r["train_mpe2_1"],
        "flat training / (raw mpe2 x workers)": r["train_mpe2_1"] / (r["raw_mpe2"] * cfg.workers),
        "3-layer training / (raw mpe2 x workers)": r["train_mpe2_3"] / (r["raw_mpe2"] * cfg.workers),
        "3-layer native training / (raw native x workers)": r["train_native_3"] / (r["raw_native"] * cfg.workers),
    }
    if "rllib" in r:
        out["3-layer native training / RLlib"] = r["train_native_3"] / r["rllib"]
        out["3-layer mpe2 training / RLlib"] = r["train_mpe2_3"] / r["rllib"]
        out["flat mpe2 training / RLlib"] = r["train_mpe2_1"] / r["rllib"]
    return out


def markdown(r: dict[str, Any], cfg: BenchConfig, command: str) -> str:
    from hdppo.engine.config import LayerConfig
    lc = LayerConfig()
    rows = [
        ("raw MPE2 simple_spread, random actions, 1 process", r["raw_mpe2"]),
        (f"raw hdppo numpy port, {cfg.envs_per_worker} copies, 1 process", r["raw_native"]),
        ("rollout-only, flat, MPE2 copies, 1 worker", r["rollout_mpe2_1"]),
        ("rollout-only, 3-layer, MPE2 copies, 1 worker", r["rollout_mpe2_3"]),
        ("rollout-only, flat, numpy port, 1 worker", r["rollout_native_1"]),
        ("rollout-only, 3-layer, numpy port, 1 worker", r["rollout_native_3"]),
        (f"training, flat, numpy port, {cfg.workers} workers", r["train_native_1"]),
        (f"training, 3-layer, numpy port, {cfg.workers} workers", r["train_native_3"]),
        (f"training, flat, MPE2 copies, {cfg.workers} workers", r["train_mpe2_1"]),
        (f"training, 3-layer, MPE2 copies, {cfg.workers} workers", r["train_mpe2_3"]),
    ]
    if "rllib" in r:
        rows.append((f"RLlib {_ray_version()} PPO training, MPE2, {cfg.workers} env runners", r["rllib"]))
    lines = [f"Command: `{command}`", "", f"Native rows: best of {cfg.repeats} interleaved runs.", "",
             f"Settings: N={cfg.n_agents} agents, max_cycles={cfg.max_cycles}, {cfg.workers} workers x "
             f"{cfg.envs_per_worker} env copies, rollout {cfg.rollout} "
             f"(batch {cfg.rollout * cfg.envs_per_worker * cfg.workers}"
             f" env steps per low-layer update), PPO at its defaults: {lc.epochs} epochs x {lc.minibatches} "
             f"minibatches, target_kl {lc.target_kl}.", "",
             "| measurement | env steps/s |", "|---|---:|"]
    lines += [f"| {name} | {value:,.0f} |" for name, value in rows]
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in r["ratios"].items()]
    return "\n".join(lines) + "\n"


def _ray_version() -> str:
    try:
        import ray
        return ray.__version__
    except ImportError:
        return "?"
