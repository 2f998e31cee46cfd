"""Trainer: a parameter server per trained layer, a worker pool, the DPPO loop, schedules, a run folder.

Sync mode: all workers collect; for each due layer the pool computes one minibatch gradient each,
the layer's server aggregates and steps, workers pull, for every epoch and minibatch (DPPO).
Async mode: each worker is driven on its own; its gradients are applied as they arrive unless
too stale. Experience mode sends transitions and the server runs the PPO epochs.
"""
from __future__ import annotations

import errno
import json
import signal
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hdppo import provenance
from hdppo.engine.backends import make_backend
from hdppo.engine.budget import StageBudget, plan_budget, starved
from hdppo.engine.callbacks import Callbacks, Event
from hdppo.engine.checkpoint import CheckpointError, check_compatible, inspect_checkpoint, load_checkpoint
from hdppo.engine.commit import Commit, point_checkpoints, recover, write_commit
from hdppo.engine.config import TrainConfig, check_train_config, train_config_to_dict
from hdppo.engine.evaluation import TrainingEval, metric_of
from hdppo.engine.interface import check_interface
from hdppo.engine.loop import StageLoop
from hdppo.engine.messages import WorkerSpec
from hdppo.engine.metrics import MetricsSink
from hdppo.engine.modes import check_modes
from hdppo.engine.preflight import preflight
from hdppo.engine.resume import check_metrics, choose_commit, metrics_rows, truncate_metrics
from hdppo.engine.run_state import RunState, Stage
from hdppo.engine.server import ParameterServer
from hdppo.engine.spec import RunSpec
from hdppo.errors import ConfigError, HdppoError
from hdppo.runfolder import load_run_config, record_scenario
from hdppo.runlock import LOCK_FILE, RunLock

WORK_UNIT = 16 * 256          # env steps per copy x copies of a default collect: worker_timeout covers this much
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
WRITE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, getattr(errno, "EDQUOT", -1)}


class RunInterrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP stopped the run after it committed."""

    def __init__(self, signum: int, commit: Commit | None) -> None:
        self.signum, self.commit = signum, commit
        super().__init__(f"stopped by {signal.Signals(signum).name}")


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

    def __init__(self, spec: RunSpec, resume: bool = False, reinit: tuple[str, ...] = (),
                 callbacks: Iterable[Any] | None = None) -> None:
        import torch
        torch.set_num_threads(1)   # the servers' maths must not depend on the thread count
        self.spec, self.tc = spec, spec.train
        self.out = Path(spec.out)
        resolved = spec.resolve()                   # once: from_overrides already did it for the CLI and train()
        self.scenario, self.cfg = resolved.scenario, resolved.config
        self.infos = spec.layer_infos()
        self.names = [i.name for i in self.infos]
        for layer in list(spec.layers) + list(spec.frozen):
            if layer not in self.names:
                raise ConfigError(f"scenario {self.scenario.name!r} has no layer {layer!r}",
                                  f"use one of {self.names} or all")
        for layer in self.names:
            self.tc.layer(layer)
        check_train_config(self.tc)                 # also for configs built in Python, not through overrides
        check_modes(self.tc)
        if self.tc.eval_every:
            metric_of(self.tc, self.names)          # eval_metric's layer, refused before any folder
        self._check_sync_modes()
        self._check_frozen()
        self.stages = plan_stages(self.names, spec.layers, self.tc)
        notes = preflight(self.tc, self.infos, self.stages, spec.frozen)   # sizes vs this machine, before any folder
        self.state: dict[str, Any] = {"env_steps": 0, "stage": 0, "stage_steps": 0, "finished": False,
                                      "worker_steps": []}
        self.commit: Commit | None = None
        self.stop_signal: int | None = None
        self.callbacks = Callbacks(callbacks)
        self.sink: MetricsSink | None = None
        self.evaluation: TrainingEval | None = None
        self.reinit = set(reinit)
        self.dropped_rows: dict[str, int] = {}      # metrics rows after the resumed commit, cut off
        for layer in self.reinit:
            if layer not in spec.layers:
                raise ConfigError(f"--reinit {layer}: {layer!r} is not a layer this run trains",
                                  f"use one of {spec.layers}")
        self.lock = RunLock(self.out)               # one writer per run folder, held until run() ends
        try:
            if resume:
                self._load_state()
                self._extend_budget()
                self._settle()
            else:
                self._init_run_dir()
            self.budget: list[StageBudget] = self._plan_budget()  # after every refusal: warnings only for real runs
            for line in notes:
                warnings.warn(line, stacklevel=2)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Give back the run folder's write lock (run() does it when it ends, however it ends)."""
        self.lock.release()

    # ---- setup -------------------------------------------------------------------------------
    def _check_sync_modes(self) -> None:
        modes = {self.tc.layers[n].sync for n in self.spec.layers}
        if len(modes) > 1:
            raise ConfigError(f"trained layers mix sync modes {sorted(modes)}",
                              "set sync=sync or sync=async for all layers")

    def _check_frozen(self) -> None:
        for layer, path in self.spec.frozen.items():
            i = self.names.index(layer)
            inspect_checkpoint(path)              # its policy entry rebuilds it in the workers: checked first
            _, meta = load_checkpoint(path)       # refuses a corrupt checkpoint here, before any work
            check_interface(meta, self.infos[i], self.infos[i - 1].action_space if i else None,
                            f"--load {layer}={path}")

    def _init_run_dir(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"--out {self.out} is a file, not a folder", "pass a new folder to --out")
        self._refuse_non_empty()
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self.lock.acquire()
        except OSError as exc:
            raise self.write_error(exc, "nothing (the run did not start)") from None
        self._refuse_non_empty()                    # again, holding the lock: another start may have won
        config = {"scenario": self.spec.scenario, "scenario_name": self.scenario.name,
                  "scenario_overrides": self.spec.scenario_overrides,
                  "scenario_config": _jsonable(self.cfg), "train": train_config_to_dict(self.tc),
                  "layers": self.spec.layers, "frozen": self.spec.frozen,
                  "layer_names": self.names, "stages": [s.__dict__ for s in self.stages]}
        try:
            _write_json(self.out / "config.json", config)
            record_scenario(self.out, self.spec.scenario)   # a path scenario's file and sha256, for eval and load
            provenance.record(self.out)             # which code and packages made this run
            self.commit_now({}, "start")
        except OSError as exc:
            raise self.write_error(exc, "nothing (the run did not start)") from None

    def _refuse_non_empty(self) -> None:
        if self.out.is_dir() and any(p.name != LOCK_FILE for p in self.out.iterdir()):
            raise ConfigError(f"run folder {self.out} already exists and is not empty",
                              f"pass a new --out, or continue it with `hdppo train --resume {self.out}`")

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
        """Continue from the newest run commit: its state, its layers; metrics cut back to it."""
        if not self.out.is_dir():
            raise ConfigError(f"{self.out} is not a folder", "pass the --out folder of a `hdppo train` run")
        try:
            self.lock.acquire()                     # before anything is cleaned, cut or read
        except OSError as exc:
            raise self.write_error(exc, "every commit, untouched") from None
        try:
            recover(self.out)
            self.commit, state = choose_commit(self.out, self.stages, self.reinit)
        except OSError as exc:
            raise self.write_error(exc, "every commit, untouched") from None
        self.state.update(state)

    def _settle(self) -> None:
        """Once the resume is accepted: metrics cut back to the commit, checkpoints/ pointing at it."""
        assert self.commit is not None
        check_metrics(self.out, self.commit.manifest.get("metrics_rows", {}))     # refused before anything is cut
        try:
            self.dropped_rows = truncate_metrics(self.out, self.commit.manifest.get("metrics_rows", {}))
            point_checkpoints(self.out, self.commit.number)
        except OSError as exc:
            raise self.write_error(exc, "every commit, untouched") from None
        for layer in sorted(self.reinit):
            warnings.warn(f"--reinit {layer}: layer {layer!r} starts from random weights at env step "
                          f"{int(self.state['env_steps']):,} (commit {self.commit.number})", stacklevel=2)

    def _extend_budget(self) -> None:
        """`--resume RUN --steps N` past what the run has done: the last stage trains on to N env steps in all."""
        done = int(self.state["env_steps"])
        config_path = self.out / "config.json"
        config = load_run_config(self.out)
        if self.tc.steps < done and config["train"].get("steps") != self.tc.steps:
            raise ConfigError(f"--steps {self.tc.steps:,} is fewer than the {done:,} env steps run {self.out} "
                              "has already done, so resuming would do nothing",
                              f"pass --steps above {done:,} to train on, or evaluate it: `hdppo eval {self.out}`")
        extra = self.tc.steps - done
        if extra > 0 and self.state["stage"] >= len(self.stages):
            self.state.update(stage=len(self.stages) - 1, stage_steps=self.stages[-1].steps - extra,
                              finished=False)
        if config["train"].get("steps") != self.tc.steps:       # a later plain --resume keeps the new budget
            config["train"]["steps"] = self.tc.steps
            config["stages"] = [s.__dict__ for s in self.stages]
            try:
                _write_json(config_path, config)
            except OSError as exc:
                raise self.write_error(exc, f"commit {self.commit.number if self.commit else '-'}, untouched") from None

    def commit_now(self, servers: dict[str, ParameterServer], stage: str) -> Commit:
        """Write the state and every trained layer as the next run commit (see hdppo/engine/commit.py);
        layers trained in earlier stages are carried over from the previous commit."""
        fresh = {}
        for name, server in servers.items():
            tensors, meta = server.state()
            meta.update({"scenario": self.scenario.name, "stage": stage, "rng": server._rng.bit_generator.state})
            fresh[name] = (tensors, meta)
        carried = {n: self.commit.layer_dir(n) for n in self.commit.layers if n not in fresh} if self.commit else {}
        number = self.commit.number + 1 if self.commit else 0
        if self.sink is not None:
            self.sink.flush()
        self.commit = write_commit(self.out, number, dict(self.state), fresh, carried, metrics_rows(self.out))
        _write_json(self.out / "state.json", dict(self.state, commit=number))   # a copy for people and tools
        if self.callbacks:
            self.callbacks.fire(Event("commit", self.out, stage, int(self.state["env_steps"]), commit=number))
        return self.commit

    def write_error(self, exc: OSError, kept: str | None = None) -> HdppoError:
        """An OSError on writing as one line: the path, the cause, and what is kept."""
        if kept is None:
            kept = (f"commit {self.commit.number} at env step {self.commit.env_steps:,}" if self.commit
                    else "nothing")
        path = exc.filename if exc.filename and exc.filename != "(injected)" else self.out
        fix = ("free disk space" if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1))
               else "make the folder writable or pass another --out")
        return HdppoError(f"cannot write {path}: {exc.strerror or exc} (errno {exc.errno}); kept: {kept}",
                          f"{fix}, then `hdppo train --resume {self.out}`" if self.commit
                          else f"{fix}, then start the run again")

    def checkpoint_dir(self, layer: str) -> Path:
        return self.out / "checkpoints" / layer

    # ---- running -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run the remaining stages; SIGINT/SIGTERM/SIGHUP commit at the next round and raise
        RunInterrupted (a second signal stops at once, without a commit: KeyboardInterrupt)."""
        summary: dict[str, Any] = {}
        purge = int(self.state["env_steps"]) if self.commit is not None and self.state["env_steps"] else None
        restore = self._catch_signals()
        try:
            self.sink = MetricsSink(self.out, purge_step=purge, track=self.tc.track)
            if self.tc.eval_every > 0:
                self.evaluation = TrainingEval(self.out, self.tc, self.names, self.spec.scenario, self.sink,
                                               self.callbacks, self.state)
            if not self.reinit:                      # (a --reinit layer is damaged in the resumed commit)
                self._evaluate_if_due(self.stages[min(self.state["stage"], len(self.stages) - 1)].name)
            while self.state["stage"] < len(self.stages) and self.callbacks.stop_reason is None:
                self.check_stop()
                stage = self.stages[self.state["stage"]]
                summary[stage.name] = self._run_stage(stage, self.sink)
                if self.callbacks.stop_reason is not None and self.state["stage"] < len(self.stages):
                    summary[stage.name].setdefault("stopped_by", self.callbacks.stop_reason)
                    break
            self.check_stop()
        except OSError as exc:
            if exc.errno in WRITE_ERRNOS:
                raise self.write_error(exc) from None
            raise
        finally:
            restore()
            try:
                if self.sink is not None:
                    self.sink.close()
            finally:
                self.close()
        return summary

    def _evaluate_if_due(self, stage: str) -> None:
        """Evaluate the newest commit when an evaluation is due: at a stage's end (the end of training
        included), and when a resumed run's commit did not record the evaluation that followed it. A
        callback's stop from on_eval commits again, recording the evaluation."""
        if self.evaluation is None or self.commit is None or self.stop_signal is not None \
                or not self.evaluation.due():
            return
        self.evaluation.run(self.commit, stage)
        if self.callbacks.stop_reason is not None and not self.state["finished"]:
            self.commit_now({}, stage)

    def check_stop(self) -> None:
        """Raise RunInterrupted if a stop signal came (call right after a commit)."""
        if self.stop_signal is not None:
            raise RunInterrupted(self.stop_signal, self.commit)

    def _catch_signals(self):
        """Stop signals set `stop_signal`; the loop commits at its next round and stops."""
        def handler(signum: int, frame: Any) -> None:
            if self.stop_signal is not None:
                raise KeyboardInterrupt
            self.stop_signal = signum
        old = {}
        for sig in STOP_SIGNALS:
            try:
                old[sig] = signal.signal(sig, handler)
            except ValueError:                       # not the main thread: leave signals alone
                pass

        def restore() -> None:
            for sig, h in old.items():
                signal.signal(sig, h)
        return restore

    def _stage_frozen(self, stage: Stage) -> dict[str, str]:
        frozen = dict(self.spec.frozen)
        committed = self.commit.layers if self.commit else []
        for name in self.names:     # layers trained in an earlier stage act from the newest commit
            if name not in stage.trained and name in committed:
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
        committed = self.commit.layers if self.commit else []
        for name in stage.trained:
            i = self.names.index(name)
            server = ParameterServer(self.infos[i], self.tc.layers[name], seed=self.tc.seed * 31 + i,
                                     device=self.tc.device)
            if name in committed and name not in self.reinit:   # resuming, or fine-tuning after bottom-up stages
                self._restore(server, name)
            elif name in self.spec.frozen:              # warm start from --load
                from hdppo.engine.checkpoint import load_module_state
                tensors, _ = load_checkpoint(self.spec.frozen[name])
                load_module_state(server.policy, tensors)
            servers[name] = server
            frozen.pop(name, None)
        self.reinit -= set(stage.trained)
        n = self.tc.n_workers()
        if self.state["stage_steps"] == 0 or len(self.state.get("worker_steps") or []) != n:
            self.state["worker_steps"] = [0] * n
        specs = [WorkerSpec(self.spec.scenario, self.spec.scenario_overrides, train_config_to_dict(self.tc), w,
                            list(stage.trained), frozen) for w in range(n)]
        backend = make_backend(self.tc.backend, specs, {k: s.n_params for k, s in servers.items()},
                               address=self.tc.address, worker_cpus=self.tc.worker_cpus,
                               worker_gpus=self.tc.worker_gpus, worker_restarts=self.tc.worker_restarts,
                               counters=self.rollout_counters(stage), timeouts=self.call_timeouts(stage))
        run = RunState(self.tc, self.infos, self.state, commit=self.commit_now,
                       stop_requested=lambda: self.stop_signal is not None, check_stop=self.check_stop,
                       run_dir=self.out, callbacks=self.callbacks, evaluation=self.evaluation)
        loop = StageLoop(run, stage, servers, backend, sink)
        try:
            summary = loop.run()
        finally:
            backend.close()
        if "stopped_by" in summary:              # a callback stopped it; the loop committed that boundary
            return summary
        self.state.update(stage=self.state["stage"] + 1, stage_steps=0)
        self.state["finished"] = self.state["stage"] >= len(self.stages)
        self.commit_now(servers, stage.name)
        self._evaluate_if_due(stage.name)
        return summary

    def _restore(self, server: ParameterServer, name: str) -> None:
        """Load a layer's server (weights, Adam, version, schedule, RNG) from the current commit."""
        assert self.commit is not None
        path = self.commit.layer_dir(name)
        fix = f"pass --reinit {name} to re-create it from random weights"
        tensors, meta = load_checkpoint(path)
        if meta.get("layer") != name:
            raise CheckpointError(f"checkpoint {path} records layer {meta.get('layer')!r}, not {name!r}; {fix}")
        info = self.infos[self.names.index(name)]
        check_compatible(meta, {"obs_dim": info.obs_dim, "action_space": repr(info.action_space)},
                         f"layer {name!r} in commit {path}")
        try:
            server.load_state(tensors, meta)
            if isinstance(meta.get("rng"), dict):
                server._rng.bit_generator.state = meta["rng"]
        except CheckpointError:
            raise
        except (KeyError, ValueError, TypeError) as exc:
            raise CheckpointError(f"checkpoint {path} of layer {name!r} has a malformed meta.json "
                                  f"({type(exc).__name__}: {exc}); {fix}") from None

    def rollout_counters(self, stage: Stage) -> list[dict[str, int]]:
        """Per worker, env steps already in each layer's current rollout: a resumed stage falls due
        at the same env steps as an uninterrupted one (the partial rollouts' data is not kept)."""
        out = []
        interval = {i.name: i.interval for i in self.infos}
        for steps in self.state["worker_steps"]:
            out.append({name: int(steps) % self.tc.layers[name].rollout_steps(interval[name])
                        for name in stage.trained})
        return out

    def call_timeouts(self, stage: Stage) -> dict[str, float]:
        """Deadline per worker call: worker_timeout, scaled up for a collect asking more env steps
        than WORK_UNIT (copies x the shortest rollout); `start` (building a worker's envs) scaled up
        likewise for more than WORK_UNIT's 16 copies; a peer update (a whole update's rounds) by the
        most rounds a trained layer's update has."""
        rollout = min(self.tc.layers[n].rollout_steps(self.infos[self.names.index(n)].interval) for n in stage.trained)
        work = self.tc.envs_per_worker * rollout
        base = float(self.tc.worker_timeout)
        rounds = max(self.tc.layers[n].epochs * self.tc.layers[n].minibatches for n in stage.trained)
        return {"collect": base * max(1.0, work / WORK_UNIT), "gradient": base, "experience": base, "pull": base,
                "peer_update": base * rounds, "start": base * max(1.0, self.tc.envs_per_worker / 16)}


def _jsonable(cfg: Any) -> Any:
    import dataclasses
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)

