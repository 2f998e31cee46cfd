"""Trainer: a parameter server per trained layer, a worker pool, the DPPO loop, schedules, a run folder.

Sync mode: all workers collect; for each due layer the pool computes one minibatch gradient each,
the layer's server aggregates and steps, workers pull, for every epoch and minibatch (DPPO).
Async mode: each worker is driven on its own; its gradients are applied as they arrive unless
too stale. Experience mode sends transitions and the server runs the PPO epochs.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from .backends import make_backend
from .budget import StageBudget, plan_budget, starved
from .checkpoint import check_compatible, load_checkpoint
from .errors import ConfigError
from .hierarchy import HierarchyEnv, LayerInfo
from .loop import StageLoop
from .metrics import MetricsSink
from .scenario import Scenario, load_scenario
from .server import ParameterServer
from .train_config import TrainConfig, train_config_to_dict
from .worker import WorkerSpec


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
        self.budget: list[StageBudget] = self._plan_budget()     # after every refusal: warnings only for real runs

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

    def _plan_budget(self) -> list[StageBudget]:
        """What the budget buys each layer; warns (at train start) about layers with too few updates."""
        intervals = {i.name: i.interval for i in self.infos}
        slots = {i.name: i.n_slots for i in self.infos}
        n, envs = self.tc.n_workers(), self.tc.envs_per_worker
        budget = plan_budget(self.stages, self.tc.layers, intervals, slots, n, envs)
        for line in starved(budget, envs, n, intervals):
            warnings.warn(line, stacklevel=3)
        return budget

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
        backend = make_backend(self.tc.backend, specs, {k: s.n_params for k, s in servers.items()},
                               address=self.tc.address, worker_cpus=self.tc.worker_cpus,
                               worker_gpus=self.tc.worker_gpus, worker_restarts=self.tc.worker_restarts)
        loop = StageLoop(self, stage, servers, backend, sink)
        try:
            return loop.run()
        finally:
            backend.close()


def _jsonable(cfg: Any) -> Any:
    import dataclasses
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)
