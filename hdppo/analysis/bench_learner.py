"""`hdppo bench` learner rows: what one layer's update costs, and what is left of the env rate.

Measured side by side in one run on two tasks, `spread` (hdppo's numpy port, a flat team) and VMAS
`balance` (the `vmas_balance` scenario, BenchMARL's task parameters, the task that
examples/benchmarks/vs_benchmarl.py trains), every layer setting at its `LayerConfig` default:

1. Learner alone: the wall time of one layer's whole update of one batch (every epoch and
   minibatch; `target_kl=0` so it is a fixed amount of work) in a real training run with
   `workers` process workers, in gradients mode (the rounds of worker gradients, the server's
   apply and publish) and in experience mode (`ParameterServer.train`), against a bare torch
   loop in one process with one thread on the same MLP (`build_policy`), the same number of rows,
   minibatches and epochs (`torch.optim.Adam`, forward, `ppo_loss`, backward, clip, step).
2. Training against rollout-only: training env steps/s at the default config (target_kl on)
   against the same `workers` process workers doing nothing but collect calls.
3. Where the time of each training run went per update (`StageLoop`'s `timings`).

Each figure is taken `repeats` times, the tasks and rows interleaved; the best of each is kept.
"""
from __future__ import annotations

import math
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hdppo.analysis.bench import BenchConfig
from hdppo.errors import ConfigError

TARGET_LEARNER = 0.6          # bare loop time / hdppo's update time
TARGET_TRAINING = 0.5         # training env steps/s / rollout-only env steps/s
KNOWN_TASKS = ("spread", "balance")
# task -> its hdppo scenario
SCENARIOS = {"spread": "spread", "balance": "vmas_balance"}
# training runs of the learner rows: (mode, target_kl off?)
RUNS = {"gradients": ("gradients", True), "experience": ("experience", True), "default": ("gradients", False)}
BREAKDOWN_RUNS = {"default": "gradients, default config", "gradients": "gradients, target_kl=0",
                  "experience": "experience, target_kl=0"}
PARTS = ("collect", "gradient compute (slowest worker)", "transport + waiting", "apply",
         "experience (transport)", "train (server PPO epochs)", "publish", "other (logging, bookkeeping)")


def scenario_overrides(task: str, cfg: BenchConfig) -> dict[str, Any]:
    """The scenario settings of a task: spread as the other bench rows run it (flat, numpy port);
    balance with its scenario's own defaults (BenchMARL's task parameters, flat)."""
    if task == "spread":
        return {"layers": 1, "native": True, "n_agents": cfg.n_agents, "max_cycles": cfg.max_cycles}
    if task == "balance":
        return {"layers": 1}
    raise ConfigError(f"the learner bench has no task {task!r}", f"pass tasks= one or more of {','.join(KNOWN_TASKS)}")


def tasks_of(cfg: BenchConfig) -> list[str]:
    tasks = [t.strip() for t in cfg.tasks.split(",") if t.strip()]
    for t in tasks:
        scenario_overrides(t, cfg)
    return tasks


def batch_env_steps(cfg: BenchConfig) -> int:
    """Env steps of one update's batch: rollout x copies x workers."""
    return cfg.rollout * cfg.envs_per_worker * cfg.workers


def run_spec(task: str, cfg: BenchConfig, out: Path, extra: dict[str, str] | None = None,
             envs_per_worker: int | None = None) -> Any:
    """The RunSpec of a task at the default config, but for the bench's pool, batch and budget."""
    from hdppo.engine.spec import RunSpec
    overrides: dict[str, Any] = dict(scenario_overrides(task, cfg))
    overrides.update({"workers": str(cfg.workers), "envs_per_worker": str(envs_per_worker or cfg.envs_per_worker),
                      "rollout": str(cfg.rollout), "backend": "process", "progress": "false",
                      "steps": str(cfg.updates * batch_env_steps(cfg))})
    overrides.update(extra or {})
    return RunSpec.from_overrides(SCENARIOS[task], overrides, layers="all", out=out)


# ---- training runs ----------------------------------------------------------------------------
@dataclass
class StageRun:
    """One training run's stage: its summary, per-update figures and where its seconds went."""

    mode: str
    target_kl: float
    env_steps: int
    seconds: float
    rounds: int                   # layer updates
    optimizer_steps: int          # Adam steps over the run (from the server's optimizer state)
    epochs: float                 # epochs run per update (mean of the layer's `epochs` column)
    rows: float                   # transitions per update (mean of the `transitions` column)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return self.env_steps / self.seconds

    @property
    def steps_per_update(self) -> float:
        return self.optimizer_steps / self.rounds

    @property
    def learner_seconds(self) -> float:
        """Wall seconds of one update: gradient rounds, apply and publish, or the server's train."""
        t = self.timings
        total = t["train"] if self.mode == "experience" else t["gradient_rounds"] + t["apply"] + t["publish"]
        return total / self.rounds

    def breakdown(self) -> list[tuple[str, float]]:
        """(part, seconds per update) of the stage; the parts add up to the stage's wall time."""
        t, n = self.timings, self.rounds
        parts = [("collect", t["collect"])]
        if self.mode == "experience":
            parts += [("experience (transport)", t["experience"]), ("train (server PPO epochs)", t["train"])]
        else:
            parts += [("gradient compute (slowest worker)", t["gradient_compute"]),
                      ("transport + waiting", t["gradient_rounds"] - t["gradient_compute"]),
                      ("apply", t["apply"])]
        parts.append(("publish", t["publish"]))
        parts.append(("other (logging, bookkeeping)", self.seconds - sum(s for _, s in parts)))
        return [(name, s / n) for name, s in parts]


def training_run(task: str, cfg: BenchConfig, run: str) -> StageRun:
    """A short training run (`cfg.updates` updates) of a task through the Trainer and ProcessBackend."""
    from hdppo.engine.checkpoint import OPTIM_PREFIX, load_checkpoint
    from hdppo.engine.metrics import read_csv
    from hdppo.engine.trainer import Trainer
    mode, kl_off = RUNS[run]
    extra = {"mode": mode}
    if kl_off:
        extra["target_kl"] = "0"
    tmp = Path(tempfile.mkdtemp(prefix="hdppo-bench-learner-"))
    try:
        spec = run_spec(task, cfg, tmp / "run", extra)
        if len(spec.layers) != 1:
            raise ValueError(f"the learner bench trains one layer; {task} has {spec.layers}")
        layer = spec.layers[0]
        with warnings.catch_warnings():          # a few updates are what this run is for
            warnings.filterwarnings("ignore", message=r"layer '.*' gets \d+ update")
            summary = Trainer(spec).run()
        info = next(iter(summary.values()))
        rows = [r for r in read_csv(spec.out, layer) if not math.isnan(r.get("epochs", math.nan))]
        tensors, _ = load_checkpoint(spec.out / "checkpoints" / layer)
        steps = max(int(v.max()) for k, v in tensors.items()
                    if k.startswith(f"{OPTIM_PREFIX}state.") and k.endswith(".step"))
        return StageRun(mode, spec.train.layers[layer].target_kl, int(info["env_steps"]), float(info["seconds"]),
                        int(info["rounds"][layer]), steps, _mean([r["epochs"] for r in rows]),
                        _mean([r.get("transitions", math.nan) for r in rows]), dict(info["timings"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


# ---- rollout only -----------------------------------------------------------------------------
def rollout_pool(task: str, cfg: BenchConfig) -> float:
    """Env steps/s of `cfg.workers` process workers answering collect calls only (no update): the
    same workers, copies, rollout and collect code as training, with the learner left out."""
    from hdppo.engine.backends import make_backend
    from hdppo.engine.config import train_config_to_dict
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.server import ParameterServer
    tmp = Path(tempfile.mkdtemp(prefix="hdppo-bench-learner-"))
    try:
        spec = run_spec(task, cfg, tmp / "run")
        infos = {i.name: i for i in spec.layer_infos()}
        servers = {n: ParameterServer(infos[n], spec.train.layers[n], 0) for n in spec.layers}
        specs = [WorkerSpec(spec.scenario, spec.scenario_overrides, train_config_to_dict(spec.train), w, spec.layers)
                 for w in range(cfg.workers)]
        backend = make_backend("process", specs, {n: s.n_params for n, s in servers.items()})
        try:
            for n, s in servers.items():
                backend.params.publish(n, 1, s.ent_coef, s.params())
            workers = list(range(cfg.workers))
            backend.call(workers, "collect")            # warm-up, as training's first collect
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < cfg.seconds:
                steps += sum(r.env_steps for r in backend.call(workers, "collect"))
            return steps / (time.perf_counter() - t0)
        finally:
            backend.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- the bare loop ----------------------------------------------------------------------------
@dataclass
class BareRun:
    seconds: float              # per update
    optimizer_steps: int        # per update
    rows: int                   # transitions in the batch


def bare_loop(task: str, cfg: BenchConfig, compiled: bool = False) -> BareRun:
    """One update's batch (every worker's rows, collected by one inline Worker with all the copies)
    learnt by a bare torch loop in this process on one thread: the layer's MLP from `build_policy`,
    `torch.optim.Adam`, shuffled minibatches, forward, `ppo_loss`, backward, clip, step; the mean of
    `cfg.updates` updates. `compiled`: the forward and loss (and so their backward) under
    `torch.compile`, its compile done by one untimed pass over the minibatches first."""
    import numpy as np
    import torch

    from hdppo.engine.config import train_config_to_dict
    from hdppo.engine.learner import build_policy
    from hdppo.engine.messages import WorkerSpec
    from hdppo.engine.params import MemoryParams
    from hdppo.engine.ppo import ppo_loss
    from hdppo.engine.server import ParameterServer
    from hdppo.engine.worker import Worker
    tmp = Path(tempfile.mkdtemp(prefix="hdppo-bench-learner-"))
    try:
        spec = run_spec(task, cfg, tmp / "run", envs_per_worker=cfg.envs_per_worker * cfg.workers)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    layer = spec.layers[0]
    lc = spec.train.layers[layer]
    params = MemoryParams()
    w = Worker(WorkerSpec(spec.scenario, spec.scenario_overrides, train_config_to_dict(spec.train), 0, spec.layers),
               params)
    try:
        rt = w.by_name[layer]
        params.publish(layer, 1, lc.ent_coef, ParameterServer(rt.info, lc, 0).params())
        w.collect()
        b = rt.batch
        assert b is not None and len(b) > 0, "the inline worker collected no batch"
        info = rt.info
    finally:
        w.close()
    torch.set_num_threads(1)
    policy: Any = build_policy(info, lc, 0)
    opt = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=lc.lr, eps=1e-5)
    t = lambda x: torch.as_tensor(np.ascontiguousarray(x))  # noqa: E731
    o = lambda x: None if x is None else t(x)  # noqa: E731
    obs, actions, mask, roles, crit = t(b.obs), t(b.actions), o(b.action_mask), o(b.roles), o(b.critic_obs)
    old_logp, adv = t(b.logp).float(), t(b.advantages).float()
    with torch.no_grad():
        old_v, ret = policy.normalize_value(t(b.values).float()), policy.normalize_value(t(b.returns).float())
    def loss(idx: Any) -> Any:
        logp, entropy, values = policy.evaluate(
            obs[idx], actions[idx], mask=None if mask is None else mask[idx],
            roles=None if roles is None else roles[idx], critic_obs=None if crit is None else crit[idx])
        return ppo_loss(logp, old_logp[idx], adv[idx], policy.normalize_value(values), old_v[idx], ret[idx],
                        entropy, clip_eps=lc.clip_eps, vf_coef=lc.vf_coef, ent_coef=lc.ent_coef,
                        clip_vloss=lc.clip_vloss, normalize_advantages=lc.norm_adv).loss

    gen = torch.Generator().manual_seed(0)
    n, steps = len(b), 0
    if compiled:
        loss = torch.compile(loss)
        for idx in torch.randperm(n, generator=gen).tensor_split(lc.minibatches):    # every minibatch size once
            if len(idx):
                loss(idx).backward()
        opt.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    for _ in range(cfg.updates):
        for _ in range(lc.epochs):
            for idx in torch.randperm(n, generator=gen).tensor_split(lc.minibatches):
                if len(idx) == 0:
                    continue
                opt.zero_grad(set_to_none=True)
                loss(idx).backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), lc.max_grad_norm)
                opt.step()
                steps += 1
    seconds = time.perf_counter() - t0
    return BareRun(seconds / cfg.updates, steps // cfg.updates, n)


# ---- the whole measurement --------------------------------------------------------------------
def run_learner(cfg: BenchConfig, log=print) -> dict[str, Any]:
    """Every learner figure of every task, `cfg.repeats` interleaved rounds, best kept: per task
    `bare` (BareRun), `runs` (run -> StageRun: the fastest update, or the fastest training for
    `default`), `rollout` (env steps/s), and `ratios` / `targets`."""
    tasks = tasks_of(cfg)
    out: dict[str, Any] = {t: {"runs": {}} for t in tasks}
    for r in range(cfg.repeats):
        for task in tasks:
            log(f"learner rows: {task}, round {r + 1} of {cfg.repeats}...")
            res = out[task]
            for run in RUNS:
                got = training_run(task, cfg, run)
                old = res["runs"].get(run)
                better = (got.steps_per_s > old.steps_per_s if run == "default"
                          else got.learner_seconds < old.learner_seconds) if old else True
                if better:
                    res["runs"][run] = got
            for key, compiled in (("bare", False), ("bare_compiled", True))[:1 + cfg.compile_bare]:
                bare = bare_loop(task, cfg, compiled)
                if key not in res or bare.seconds < res[key].seconds:
                    res[key] = bare
            res["rollout"] = max(res.get("rollout", 0.0), rollout_pool(task, cfg))
    for task in tasks:
        res = out[task]
        runs = res["runs"]
        res["ratios"] = {
            "bare / gradients": res["bare"].seconds / runs["gradients"].learner_seconds,
            "bare / experience": res["bare"].seconds / runs["experience"].learner_seconds,
            "training / rollout-only": runs["default"].steps_per_s / res["rollout"],
        }
        if "bare_compiled" in res:            # what compiling would gain; no target
            res["compile_speedup"] = res["bare"].seconds / res["bare_compiled"].seconds
    out_targets = []
    for task in tasks:
        for name, value in out[task]["ratios"].items():
            target = TARGET_TRAINING if name.startswith("training") else TARGET_LEARNER
            out_targets.append((task, name, value, target, value >= target))
    return {"tasks": out, "targets": out_targets}


def markdown(result: dict[str, Any], cfg: BenchConfig, command: str) -> str:
    from hdppo.engine.config import LayerConfig
    d = LayerConfig()
    tasks = result["tasks"]
    lines = [f"Command: `{command}`", "",
             f"Best of {cfg.repeats} interleaved rounds. Every layer setting at its default ({d.epochs} epochs x "
             f"{d.minibatches} minibatches, target_kl {d.target_kl}, hidden {'x'.join(map(str, d.hidden))}), "
             f"{cfg.workers} process workers x {cfg.envs_per_worker} copies, rollout {cfg.rollout} "
             f"({batch_env_steps(cfg):,} env steps per update), {cfg.updates} updates per training run. "
             f"spread: numpy port, flat, {cfg.n_agents} agents, max_cycles {cfg.max_cycles}; "
             "balance: vmas_balance, flat (BenchMARL's task parameters).", "",
             "### 1. Learner alone: one layer's update of one batch (target_kl=0)", "",
             "| task | rows | optimizer steps | bare torch loop, 1 process | hdppo gradients mode | "
             "hdppo experience mode |", "|---|---:|---:|---:|---:|---:|"]
    for task, res in tasks.items():
        g, e, b = res["runs"]["gradients"], res["runs"]["experience"], res["bare"]
        lines.append(f"| {task} | {b.rows:,} | {b.optimizer_steps} (hdppo: {g.steps_per_update:.0f}, "
                     f"{e.steps_per_update:.0f}) | {b.seconds * 1e3:,.0f} ms | {g.learner_seconds * 1e3:,.0f} ms | "
                     f"{e.learner_seconds * 1e3:,.0f} ms |")
    if any("bare_compiled" in res for res in tasks.values()):
        lines += ["", "The bare loop with its forward and loss under `torch.compile` (compile excluded, "
                  "`compile_bare=true`):", "", "| task | bare loop | compiled | speed-up |", "|---|---:|---:|---:|"]
        for task, res in tasks.items():
            b, c = res["bare"], res["bare_compiled"]
            lines.append(f"| {task} | {b.seconds * 1e3:,.0f} ms | {c.seconds * 1e3:,.0f} ms | "
                         f"{res['compile_speedup']:.2f}x |")
    lines += ["", "### 2. Training against rollout-only (default config)", "",
              "| task | training env steps/s | epochs per update | rollout-only env steps/s |",
              "|---|---:|---:|---:|"]
    for task, res in tasks.items():
        c = res["runs"]["default"]
        lines.append(f"| {task} | {c.steps_per_s:,.0f} | {c.epochs:.1f} | {res['rollout']:,.0f} |")
    lines += ["", "### 3. Where the time goes, per update", ""]
    for task, res in tasks.items():
        runs = {r: res["runs"][r] for r in BREAKDOWN_RUNS}
        lines += [f"{task}:", "", "| part | " + " | ".join(BREAKDOWN_RUNS.values()) + " |",
                  "|---|" + "---:|" * len(runs)]
        cells: dict[str, dict[str, str]] = {}
        for run, sr in runs.items():
            for name, s in sr.breakdown():
                cells.setdefault(name, {})[run] = f"{s * 1e3:,.0f} ms ({100 * s * sr.rounds / sr.seconds:.0f}%)"
        for name in PARTS:
            lines.append(f"| {name} | " + " | ".join(cells[name].get(r, "-") for r in runs) + " |")
        lines.append("| stage, per update | " + " | ".join(f"{sr.seconds / sr.rounds * 1e3:,.0f} ms"
                                                        for sr in runs.values()) + " |")
        lines.append("")
    lines += ["### Targets", "", "| task | ratio | value | target | verdict |", "|---|---|---:|---:|---|"]
    for task, name, value, target, met in result["targets"]:
        lines.append(f"| {task} | {name} | {value:.2f} | >= {target} | {'met' if met else 'not met'} |")
    return "\n".join(lines) + "\n"
