"""Trainer: a parameter server per trained layer, a worker pool, the DPPO loop, schedules, a run folder.

Sync mode: all workers collect; for each due layer the pool computes one minibatch gradient each,
the layer's server aggregates and steps, workers pull, for every epoch and minibatch (DPPO).
Async mode: each worker is driven on its own; its gradients are applied as they arrive unless
too stale. Experience mode sends transitions and the server runs the PPO epochs.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .backends import Backend, make_backend
from .checkpoint import CheckpointError, check_compatible, load_checkpoint, save_checkpoint
from .diagnostics import action_divergence, state_divergence
from .errors import ConfigError, HdppoError
from .hierarchy import HierarchyEnv, LayerInfo
from .learner import policy_meta
from .metrics import CpuMeter, MetricsSink, Progress
from .scenario import Scenario, load_scenario
from .server import ParameterServer
from .train_config import TrainConfig, train_config_to_dict
from .worker import CollectResult, GradResult, WorkerSpec


@dataclass
class Stage:
    """One training stage: which layers learn and how many env steps it gets."""

    trained: list[str]
    steps: int
    name: str = "train"


@dataclass
class RunSpec:
    scenario: str
    scenario_overrides: dict
    train: TrainConfig
    layers: list[str]                         # layers trained (in the concurrent schedule)
    frozen: dict[str, str] = field(default_factory=dict)
    out: Path = Path("runs/run")


def layer_infos(scenario: Scenario, cfg: Any, seed: int) -> list[LayerInfo]:
    """The layers' static descriptions, from a one-copy probe of the hierarchy."""
    probe = HierarchyEnv(scenario, cfg, n_envs=1, seed=seed)
    try:
        return probe.info
    finally:
        probe.close()


def plan_stages(names: list[str], trained: list[str], tc: TrainConfig) -> list[Stage]:
    """Concurrent: one stage. Bottom-up: each trained layer from the bottom, then optional joint fine-tuning."""
    if tc.schedule == "concurrent" or len(trained) == 1:
        return [Stage(list(trained), tc.steps, "concurrent")]
    order = [n for n in reversed(names) if n in trained]
    tune = int(tc.steps * tc.finetune)
    each = (tc.steps - tune) // len(order)
    stages = [Stage([n], each, f"bottom-up:{n}") for n in order]
    if tune > 0:
        stages.append(Stage(list(trained), tune, "finetune"))
    return stages


class Trainer:
    """Runs a RunSpec to completion (or resumes it), writing everything into the run folder."""

    def __init__(self, spec: RunSpec, resume: bool = False) -> None:
        import torch
        torch.set_num_threads(1)   # the servers' maths must not depend on the thread count
        self.spec, self.tc = spec, spec.train
        self.out = Path(spec.out)
        self.scenario = load_scenario(spec.scenario)
        self.cfg = self.scenario.make_config(spec.scenario_overrides)
        self.infos = layer_infos(self.scenario, self.cfg, self.tc.seed)
        self.names = [i.name for i in self.infos]
        for layer in list(spec.layers) + list(spec.frozen):
            if layer not in self.names:
                raise ConfigError(f"scenario {self.scenario.name!r} has no layer {layer!r}",
                                  f"use one of {self.names} or all")
        for layer in self.names:
            self.tc.layer(layer)
        self._check_sync_modes()
        self._check_frozen()
        self.stages = plan_stages(self.names, spec.layers, self.tc)
        self.state = {"env_steps": 0, "stage": 0, "stage_steps": 0, "finished": False}
        if resume:
            self._load_state()
            self._extend_budget()
        else:
            self._init_run_dir()

    # ---- setup -------------------------------------------------------------------------------
    def _check_sync_modes(self) -> None:
        modes = {self.tc.layers[n].sync for n in self.spec.layers}
        if len(modes) > 1:
            raise ConfigError(f"trained layers mix sync modes {sorted(modes)}",
                              "set sync=sync or sync=async for all layers")

    def _check_frozen(self) -> None:
        for layer, path in self.spec.frozen.items():
            info = self.infos[self.names.index(layer)]
            _, meta = load_checkpoint(path)       # refuses a corrupt checkpoint here, before any work
            check_compatible(meta, {"obs_dim": info.obs_dim, "action_space": repr(info.action_space)},
                             f"--load {layer}={path}")

    def _init_run_dir(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"--out {self.out} is a file, not a folder", "pass a new folder to --out")
        if self.out.exists() and any(self.out.iterdir()):
            raise ConfigError(f"run folder {self.out} already exists and is not empty",
                              f"pass a new --out, or continue it with `hdppo train --resume {self.out}`")
        self.out.mkdir(parents=True, exist_ok=True)
        config = {"scenario": self.spec.scenario, "scenario_name": self.scenario.name,
                  "scenario_overrides": self.spec.scenario_overrides,
                  "scenario_config": _jsonable(self.cfg), "train": train_config_to_dict(self.tc),
                  "layers": self.spec.layers, "frozen": self.spec.frozen,
                  "layer_names": self.names, "stages": [s.__dict__ for s in self.stages]}
        _write_json(self.out / "config.json", config)
        self._save_state()

    def _load_state(self) -> None:
        path = self.out / "state.json"
        if not path.is_file():
            raise ConfigError(f"{self.out} has no state.json, so it is not an hdppo run folder",
                              "pass the folder a `hdppo train` run wrote")
        self.state.update(json.loads(path.read_text()))

    def _extend_budget(self) -> None:
        """`--resume RUN --steps N` past what the run has done: the last stage trains on to N env steps in all."""
        extra = self.tc.steps - int(self.state["env_steps"])
        if extra > 0 and self.state["stage"] >= len(self.stages):
            self.state.update(stage=len(self.stages) - 1, stage_steps=self.stages[-1].steps - extra,
                              finished=False)
        config_path = self.out / "config.json"
        config = json.loads(config_path.read_text())
        if config["train"].get("steps") != self.tc.steps:       # a later plain --resume keeps the new budget
            config["train"]["steps"] = self.tc.steps
            config["stages"] = [s.__dict__ for s in self.stages]
            _write_json(config_path, config)

    def _save_state(self) -> None:
        _write_json(self.out / "state.json", self.state)

    def checkpoint_dir(self, layer: str) -> Path:
        return self.out / "checkpoints" / layer

    # ---- running -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        summary: dict[str, Any] = {}
        sink = MetricsSink(self.out)
        try:
            while self.state["stage"] < len(self.stages):
                stage = self.stages[self.state["stage"]]
                summary[stage.name] = self._run_stage(stage, sink)
                self.state["stage"] += 1
                self.state["stage_steps"] = 0
                self._save_state()
            self.state["finished"] = True
            self._save_state()
        finally:
            sink.close()
        return summary

    def _stage_frozen(self, stage: Stage) -> dict[str, str]:
        frozen = dict(self.spec.frozen)
        for name in self.names:     # layers trained in an earlier stage act from their checkpoint
            if name not in stage.trained and (self.checkpoint_dir(name) / "meta.json").is_file():
                frozen[name] = str(self.checkpoint_dir(name))
        return frozen

    def _warn_untrained_below(self, stage: Stage, frozen: dict[str, str]) -> None:
        top = min(self.names.index(n) for n in stage.trained)
        for info, spec in zip(self.infos[top + 1:], self._specs()[top + 1:]):
            if info.name not in stage.trained and info.name not in frozen and spec.scripted is None:
                warnings.warn(f"training {stage.trained} over layer {info.name!r}, which is untrained and acts "
                              "uniformly at random; train it first (--schedule bottom-up) or --load a checkpoint",
                              stacklevel=2)

    def _specs(self):
        return self.scenario.build_layers(self.cfg)

    def _run_stage(self, stage: Stage, sink: MetricsSink) -> dict[str, Any]:
        frozen = self._stage_frozen(stage)
        self._warn_untrained_below(stage, frozen)
        servers: dict[str, ParameterServer] = {}
        for name in stage.trained:
            i = self.names.index(name)
            server = ParameterServer(self.infos[i], self.tc.layers[name], seed=self.tc.seed * 31 + i,
                                     device=self.tc.device)
            ckpt = self.checkpoint_dir(name)
            if (ckpt / "meta.json").is_file():          # resuming, or fine-tuning after bottom-up stages
                tensors, meta = load_checkpoint(ckpt)
                server.load_state(tensors, meta)
            elif name in self.spec.frozen:              # warm start from --load
                from .checkpoint import load_module_state
                tensors, _ = load_checkpoint(self.spec.frozen[name])
                load_module_state(server.policy, tensors)
            servers[name] = server
            frozen.pop(name, None)
        n = self.tc.n_workers()
        specs = [WorkerSpec(self.spec.scenario, self.spec.scenario_overrides, train_config_to_dict(self.tc), w,
                            list(stage.trained), frozen) for w in range(n)]
        backend = make_backend(self.tc.backend, specs, {k: s.n_params for k, s in servers.items()})
        loop = _Loop(self, stage, servers, backend, sink)
        try:
            return loop.run()
        finally:
            backend.close()


class _Loop:
    """The DPPO loop of one stage."""

    def __init__(self, trainer: Trainer, stage: Stage, servers: dict[str, ParameterServer], backend: Backend,
                 sink: MetricsSink) -> None:
        self.t, self.stage, self.servers, self.backend, self.sink = trainer, stage, servers, backend, sink
        self.tc = trainer.tc
        self.order = [n for n in trainer.names if n in servers]        # top to bottom
        self.pools = {n: list(range(min(self.tc.layers[n].pool or backend.n_workers, backend.n_workers)))
                      for n in self.order}
        self.progress = Progress(self.stage_target(), enabled=self.tc.progress, title=f"hdppo {stage.name}")
        self.cpu = CpuMeter()
        self.layer_view: dict[str, dict[str, float]] = {n: {} for n in self.order}
        self.episode_window: list[dict] = []
        self.last_log = 0.0
        self.t0 = time.perf_counter()
        self.steps_at_start = trainer.state["stage_steps"]
        self.rounds: dict[str, int] = {}
        for name, s in servers.items():
            self.publish(name)

    def stage_target(self) -> int:
        return self.stage.steps

    def publish(self, name: str) -> None:
        s = self.servers[name]
        self.backend.params.publish(name, s.version, s.ent_coef, s.params())

    @property
    def done(self) -> bool:
        return self.t.state["stage_steps"] >= self.stage.steps

    def run(self) -> dict[str, Any]:
        self.progress.start()
        try:
            if self.tc.layers[self.order[0]].sync == "async":
                self._run_async()
            else:
                self._run_sync()
        finally:
            self.progress.stop()
            for name in self.order:
                self.save(name)
            self.t._save_state()
        return {"env_steps": self.t.state["stage_steps"],
                "seconds": time.perf_counter() - self.t0,
                "updates": {n: s.stats.updates for n, s in self.servers.items()}}

    # ---- sync ----------------------------------------------------------------------------------
    def _run_sync(self) -> None:
        workers = list(range(self.backend.n_workers))
        while not self.done:
            results: list[CollectResult] = self.backend.call(workers, "collect")
            self.after_collect(results)
            due = results[0].due
            if any(r.due != due for r in results):
                raise HdppoError("workers disagree on which layers are due in sync mode",
                                 "give every worker the same envs_per_worker and rollout settings")
            for name in self.order:
                if name in due:
                    self.update_sync(name, results)

    def update_sync(self, name: str, results: list[CollectResult]) -> None:
        server, lc, pool = self.servers[name], self.tc.layers[name], self.pools[name]
        server.set_progress(self.t.state["env_steps"] / max(self.tc.steps, 1))
        rows = []
        if lc.mode == "gradients":
            for epoch in range(lc.epochs):
                for mb in range(lc.minibatches):
                    grads: list[GradResult] = self.backend.call(pool, "gradient", name, epoch, mb)
                    out = server.apply(grads)
                    if out:
                        rows.append(out)
                        self.publish(name)
        else:
            batches = self.backend.call(pool, "experience", name)
            out = server.train(batches)
            if out:
                rows.append(out)
                self.publish(name)
        self.log_update(name, rows, [r for r in results if r.worker in pool])

    # ---- async ---------------------------------------------------------------------------------
    def _run_async(self) -> None:
        queue: dict[int, list[tuple]] = {w: [] for w in range(self.backend.n_workers)}
        pending: dict[str, list] = {n: [] for n in self.order}
        calls: dict[int, tuple] = {}
        rows: dict[str, list] = {n: [] for n in self.order}

        def next_call(w: int) -> None:
            if queue[w]:
                call = queue[w].pop(0)
            elif self.done:
                return
            else:
                call = ("collect",)
            calls[w] = call
            self.backend.submit(w, *call)

        for w in range(self.backend.n_workers):
            next_call(w)
        while calls:
            w, result = self.backend.wait_any()
            call = calls.pop(w)
            if call[0] == "collect":
                self.after_collect([result])
                for name in self.order:
                    if name in result.due and w in self.pools[name]:
                        lc = self.tc.layers[name]
                        if lc.mode == "gradients":
                            queue[w] += [("gradient", name, e, m) for e in range(lc.epochs)
                                         for m in range(lc.minibatches)]
                        else:
                            queue[w].append(("experience", name))
            elif call[0] == "gradient":
                name = call[1]
                server = self.servers[name]
                server.set_progress(self.t.state["env_steps"] / max(self.tc.steps, 1))
                if server.apply_async(result):
                    self.publish(name)
                    rows[name].append({k: result.stats[k] for k in
                                       ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac") if k in result.stats})
                if call[2:] == (self.tc.layers[name].epochs - 1, self.tc.layers[name].minibatches - 1):
                    self.log_update(name, rows[name], [])
                    rows[name] = []
            else:
                name = call[1]
                pending[name].append(result)
                if len(pending[name]) >= len(self.pools[name]):
                    server = self.servers[name]
                    server.set_progress(self.t.state["env_steps"] / max(self.tc.steps, 1))
                    out = server.train(pending[name])
                    pending[name] = []
                    if out:
                        self.publish(name)
                        self.log_update(name, [out], [])
            next_call(w)

    # ---- bookkeeping ---------------------------------------------------------------------------
    def after_collect(self, results: list[CollectResult]) -> None:
        steps = sum(r.env_steps for r in results)
        self.t.state["env_steps"] += steps
        self.t.state["stage_steps"] += steps
        for s in self.servers.values():
            s.env_steps = self.t.state["env_steps"]
        for r in results:
            self.episode_window.extend(r.episodes)
            for name, rate in r.goal_success.items():
                self.layer_view.setdefault(name, {})["goal_success"] = rate
        self.episode_window = self.episode_window[-200:]
        self._results_window = results
        now = time.perf_counter()
        elapsed = now - self.t0
        sps = (self.t.state["stage_steps"] - self.steps_at_start) / max(elapsed, 1e-9)
        for name in self.order:
            if self.episode_window:
                key = f"return/{name}"
                self.layer_view[name]["return"] = float(np.mean([e[key] for e in self.episode_window if key in e]))
        self.progress.update(self.t.state["stage_steps"], sps, self.layer_view)
        if now - self.last_log >= self.tc.log_every or self.done:
            self.last_log = now
            row = {"env_steps": self.t.state["env_steps"], "sps": sps, "cpu_percent": self.cpu(),
                   "episodes": len(self.episode_window)}
            if self.episode_window:
                for key in self.episode_window[-1]:
                    vals = [e[key] for e in self.episode_window if isinstance(e.get(key), (int, float))]
                    if vals and key != "env":
                        row[key] = float(np.mean(vals))
            for r in results:
                row[f"worker_{r.worker}_sps"] = r.env_steps / max(r.seconds, 1e-9)
            for name in self.t.names:
                rate = self.layer_view.get(name, {}).get("goal_success")
                if rate is not None:
                    row[f"goal_success/{name}"] = rate
            self.sink.log("run", self.t.state["env_steps"], row)
            self.t._save_state()

    def log_update(self, name: str, rows: list[dict], results: list[CollectResult]) -> None:
        server = self.servers[name]
        values: dict[str, float] = {"version": server.version, "updates": server.stats.updates,
                                    "dropped_gradients": server.stats.dropped}
        for key in ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac", "grad_norm", "grad_cosine_mean",
                    "grad_cosine_min", "lr"):
            vals = [r[key] for r in rows if key in r]
            if vals:
                values[key] = float(np.mean(vals))
        if server.stats.staleness:
            st = server.stats.staleness
            total = sum(st.values())
            values["staleness_mean"] = sum(k * v for k, v in st.items()) / total
            values["staleness_max"] = float(max(st))
            for k, v in sorted(st.items()):
                values[f"staleness_{k}"] = v
        stats = [r.layer_stats.get(name) for r in results if r.layer_stats.get(name)]
        if stats:
            values["explained_variance"] = float(np.nanmean([s["explained_variance"] for s in stats]))
            values["transitions"] = float(sum(s["transitions"] for s in stats))
            with_obs = [s for s in stats if "obs_mean" in s]
            values["state_divergence"] = state_divergence([s["obs_mean"] for s in with_obs],
                                                          [s["obs_std"] for s in with_obs])
            values["action_divergence"] = action_divergence([s.get("action_hist") for s in with_obs])
        key = f"return/{name}"
        if self.episode_window:
            vals = [e[key] for e in self.episode_window if key in e]
            if vals:
                values["return"] = float(np.mean(vals))
        rate = self.layer_view.get(name, {}).get("goal_success")
        if rate is not None:
            values["goal_success"] = rate
        self.sink.log(name, self.t.state["env_steps"], values)
        per_worker: dict[int, list[float]] = {}
        for row in rows:
            for w, c in (row.get("per_worker_cosine") or {}).items():
                per_worker.setdefault(w, []).append(c)
        for r in results:
            row = {"sps": r.env_steps / max(r.seconds, 1e-9)}
            if r.worker in per_worker:
                row["grad_cosine"] = float(np.nanmean(per_worker[r.worker]))
            st = r.layer_stats.get(name)
            if st:
                row["transitions"] = st["transitions"]
                row["explained_variance"] = st["explained_variance"]
            self.sink.log(f"{name}/worker_{r.worker}", self.t.state["env_steps"], row)
        self.rounds[name] = self.rounds.get(name, 0) + 1
        self.layer_view[name].update({"updates": server.stats.updates, "version": server.version,
                                      "kl": values.get("approx_kl", float("nan")),
                                      "clipfrac": values.get("clipfrac", float("nan"))})
        if self.rounds[name] % max(self.tc.checkpoint_every, 1) == 0:
            self.save(name)

    def save(self, name: str) -> None:
        tensors, meta = self.servers[name].state()
        meta.update({"scenario": self.t.scenario.name, "stage": self.stage.name})
        save_checkpoint(self.t.checkpoint_dir(name), tensors, meta)


def _jsonable(cfg: Any) -> Any:
    import dataclasses
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)
