"""The DPPO loop of one training stage (sync or async), with its metrics and checkpoints."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from hdppo.engine import rows
from hdppo.engine.backends import Backend, CallInterrupted
from hdppo.engine.budget import schedule_progress
from hdppo.engine.callbacks import Event, StopTraining
from hdppo.engine.messages import CollectResult
from hdppo.engine.metrics import CpuMeter, MetricsSink, Progress
from hdppo.engine.modes import Call, make_mode
from hdppo.engine.peers import PeerBlocks
from hdppo.engine.run_state import RunState, Stage
from hdppo.engine.server import ParameterServer
from hdppo.errors import HdppoError

# Seconds of a sync stage by where they went: collect calls; gradient rounds (the calls' wall time),
# of which gradient_compute is the slowest worker's own work per round (the rest is transport and
# waiting); the server's apply of each round; publishing parameters; experience calls (transport);
# the server's PPO epochs in experience mode.
TIMING_KEYS = ("collect", "gradient_rounds", "gradient_compute", "apply", "publish", "experience", "train")


class StageLoop:
    """The DPPO loop of one stage: collect, update due layers (each through its mode,
    `hdppo.engine.modes`), log, checkpoint."""

    def __init__(self, run: RunState, stage: Stage, servers: dict[str, ParameterServer], backend: Backend,
                 sink: MetricsSink) -> None:
        self.run_state, self.stage, self.servers, self.backend, self.sink = run, stage, servers, backend, sink
        self.tc = run.train
        self.counters = run.counters
        self.order = [n for n in run.names if n in servers]        # top to bottom
        self.pools = {n: list(range(min(self.tc.layers[n].pool or backend.n_workers, backend.n_workers)))
                      for n in self.order}
        self.progress = Progress(self.stage_target(), mode=self.tc.progress, title=f"hdppo {stage.name}")
        self.cpu = CpuMeter()
        self.layer_view: dict[str, dict[str, float]] = {n: {} for n in self.order}
        self.episode_window: list[dict] = []
        self.goal_counts: dict[str, dict[int, tuple[int, int]]] = {}   # layer -> worker -> (finished, achieved)
        self.last_log = 0.0
        self.last_worker_log: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self.steps_at_start = self.counters["stage_steps"]
        self.opt_steps_at_start = {n: s.stats.updates for n, s in servers.items()}
        self.rounds: dict[str, int] = {}
        self.since_commit: dict[str, int] = {n: 0 for n in self.order}     # updates since the last run commit
        self.last_commit = time.monotonic()
        self.timings: dict[str, float] = dict.fromkeys(TIMING_KEYS, 0.0)   # sync mode: where the seconds went
        self.latest: dict[str, dict[int, CollectResult]] = {n: {} for n in self.order}   # async: per layer and worker
        self.peers: PeerBlocks | None = getattr(backend, "peers", None)     # process backend: peer rounds
        self.modes = {n: make_mode(self, n, self.tc.layers[n]) for n in self.order}
        for name in servers:
            self.publish(name)

    def stage_target(self) -> int:
        return self.stage.steps

    def layer_progress(self, name: str) -> float:
        """Where this stage is for a layer's schedules: at the start of the rollout its update learns
        from (as CleanRL decays by iteration), so every stage, and a short run's few updates, start
        at the configured lr and entropy instead of whatever the whole run's progress says."""
        span = self.tc.layers[name].rollout_steps(self.run_state.interval(name))
        span *= self.tc.envs_per_worker * self.backend.n_workers
        return schedule_progress(self.counters["stage_steps"], span, self.stage.steps)

    def publish(self, name: str) -> None:
        t0 = time.perf_counter()
        s = self.servers[name]
        self.backend.params.publish(name, s.version, s.ent_coef, s.params())
        self.timings["publish"] += time.perf_counter() - t0

    def timed_call(self, key: str, workers: list[int], method: str, *args: Any) -> list:
        """`backend.call` with its wall time added to `timings[key]`."""
        t0 = time.perf_counter()
        out = self.backend.call(workers, method, *args)
        self.timings[key] += time.perf_counter() - t0
        return out

    @property
    def done(self) -> bool:
        return self.counters["stage_steps"] >= self.stage.steps

    def run(self) -> dict[str, Any]:
        """Run the stage to its end, or to the round boundary after a callback asked to stop (then
        the summary has `stopped_by`; that boundary was committed)."""
        stopped_by = None
        self.progress.start()
        try:
            if self.tc.layers[self.order[0]].sync == "async":
                self._run_async()
            else:
                self._run_sync()
        except StopTraining as stop:
            stopped_by = stop.reason
        finally:
            self.progress.stop()
        summary: dict[str, Any] = {"stopped_by": stopped_by} if stopped_by else {}
        summary.update({
            "env_steps": self.counters["stage_steps"],                        # the stage's, resumed part or not
            "env_steps_run": self.counters["stage_steps"] - self.steps_at_start,   # this process's
            "seconds": time.perf_counter() - self.t0,                              # this process's
            "optimizer_steps": {n: s.stats.updates - self.opt_steps_at_start[n] for n, s in self.servers.items()},
            "rounds": {n: self.rounds.get(n, 0) for n in self.order},
            "timings": dict(self.timings)})
        return summary

    # ---- sync ----------------------------------------------------------------------------------
    def _run_sync(self) -> None:
        workers = list(range(self.backend.n_workers))
        while not self.done:
            try:
                results: list[CollectResult] = self.timed_call("collect", workers, "collect")
            except CallInterrupted:
                self.boundary()        # a stop signal ended the collect: commit this round boundary, stop
                raise
            except HdppoError:
                self.commit_before_error()
                raise
            self.after_collect(results)
            due = results[0].due
            if any(r.due != due for r in results):
                raise HdppoError("workers disagree on which layers are due in sync mode",
                                 "give every worker the same envs_per_worker and rollout settings")
            for name in self.order:
                if name in due:
                    self.update_sync(name, results)
            self.boundary()

    def update_sync(self, name: str, results: list[CollectResult]) -> None:
        server, pool = self.servers[name], self.pools[name]
        server.set_progress(self.layer_progress(name))
        self.observe_returns(name, [r for r in results if r.worker in pool])
        update_rows = self.modes[name].update()
        self.log_update(name, update_rows, [r for r in results if r.worker in pool])

    # ---- async ---------------------------------------------------------------------------------
    def _run_async(self) -> None:
        """Each worker on its own: collect, then the calls its due layers' modes ask for, then collect
        again; every answer goes to the mode of the layer it is for."""
        queue: dict[int, list[Iterator[Call]]] = {w: [] for w in range(self.backend.n_workers)}
        calls: dict[int, Call] = {}

        def next_call(w: int) -> None:
            call = None
            while queue[w] and call is None:       # an ended iterator is dropped (its mode may log as it ends)
                call = next(queue[w][0], None)
                if call is None:
                    queue[w].pop(0)
            if call is None:
                if self.done:
                    return
                call = Call("collect")
            calls[w] = call
            self.backend.submit(w, call.method, *call.args)

        for w in range(self.backend.n_workers):
            next_call(w)
        while calls:
            try:
                w, result = self.backend.wait_any()
            except CallInterrupted:
                self.boundary()        # a stop signal ended a collect (inline): commit between answers, stop
                raise
            call = calls.pop(w)
            if call.layer is None:
                self.after_collect([result])
                for name in self.order:
                    if name in result.due and w in self.pools[name]:
                        self.latest[name][w] = result
                        self.observe_returns(name, [result])
                        queue[w].append(self.modes[name].calls(w))
            else:
                self.modes[call.layer].answer(w, result)
            next_call(w)
            if calls and not self.done:
                self.boundary()

    # ---- commits -------------------------------------------------------------------------------
    def boundary(self) -> None:
        """Between rounds (sync) or answers (async): evaluate when due (commit, then score that
        commit: hdppo/engine/evaluation.py); commit when checkpoint_seconds have passed, a layer has
        made checkpoint_every updates, or a stop signal came or a callback asked to stop (then stop;
        a callback's stop at the stage's end lets the stage end and commit as usual)."""
        evaluation = self.run_state.evaluation
        if evaluation is not None and not self.done and not self.run_state.stop_requested() and evaluation.due():
            evaluation.run(self.commit(), self.stage.name, self.progress.print)
        reason = None if self.done else self.run_state.callbacks.stop_reason
        stop = self.run_state.stop_requested() or reason is not None
        due = (time.monotonic() - self.last_commit >= self.tc.checkpoint_seconds
               or any(n >= self.tc.checkpoint_every for n in self.since_commit.values()))
        if stop or (due and not self.done):
            self.commit()
        self.run_state.check_stop()
        if reason is not None:
            raise StopTraining(reason)

    def commit(self) -> Any:
        """Commit the servers now (the trainer's commit_now); returns the Commit."""
        commit = self.run_state.commit(self.servers, self.stage.name)
        self.last_commit = time.monotonic()
        self.since_commit = {n: 0 for n in self.order}
        return commit

    def commit_before_error(self) -> None:
        """A worker failed (died, hung, raised) in a sync collect: nothing has changed since the last
        round boundary, so that state is committed before the error ends the run. A failure inside
        an update leaves the servers part-way, and the last commit stands instead."""
        if not any(self.since_commit.values()):
            return
        try:
            self.run_state.commit(self.servers, self.stage.name)
        except Exception as exc:                    # the worker's error is the one to report
            import warnings
            warnings.warn(f"could not commit before stopping: {exc}", stacklevel=2)

    # ---- bookkeeping ---------------------------------------------------------------------------
    def observe_returns(self, name: str, results: list[CollectResult]) -> None:
        """value_norm: fold the new batches' value targets into the layer's statistics before it learns
        from them, and publish them (workers read them with the parameters)."""
        if not self.tc.layers[name].value_norm:
            return
        moments = [r.layer_stats[name]["return_moments"] for r in results
                   if "return_moments" in r.layer_stats.get(name, {})]
        if moments:
            self.servers[name].observe_returns(moments)
            self.publish(name)

    def after_collect(self, results: list[CollectResult]) -> None:
        steps = sum(r.env_steps for r in results)
        per_worker = self.counters["worker_steps"]
        for r in results:
            per_worker[r.worker] += r.env_steps // self.tc.envs_per_worker
        self.counters["env_steps"] += steps
        self.counters["stage_steps"] += steps
        for s in self.servers.values():
            s.env_steps = self.counters["env_steps"]
        for r in results:
            self.episode_window.extend(r.episodes)
            for name, counts in r.goal_counts.items():
                self.goal_counts.setdefault(name, {})[r.worker] = counts
        for name, per_worker in self.goal_counts.items():     # pooled over every worker's latest goals
            n = sum(c[0] for c in per_worker.values())
            self.layer_view.setdefault(name, {})["goal_success"] = sum(c[1] for c in per_worker.values()) / n
        self.episode_window = self.episode_window[-200:]
        now = time.perf_counter()
        elapsed = now - self.t0
        sps = (self.counters["stage_steps"] - self.steps_at_start) / max(elapsed, 1e-9)
        for name in self.order:
            ret = rows.episode_mean(self.episode_window, f"return/{name}")
            if ret is not None:
                self.layer_view[name]["return"] = ret
        self.progress.update(self.counters["stage_steps"], sps, self.layer_view)
        if now - self.last_log >= self.tc.log_every or self.done:
            self.last_log = now
            goal_success = {n: self.layer_view[n]["goal_success"] for n in self.run_state.names
                            if "goal_success" in self.layer_view.get(n, {})}
            row = rows.run_row(self.counters["env_steps"], sps, self.cpu(), self.episode_window, results,
                               goal_success)
            self.sink.log("run", self.counters["env_steps"], row)

    def log_update(self, name: str, update_rows: list[dict], results: list[CollectResult]) -> None:
        server = self.servers[name]
        values = rows.layer_row(server.version, server.stats.updates, server.stats.dropped, server.stats.staleness,
                                update_rows, results, name, self.episode_window,
                                self.layer_view.get(name, {}).get("goal_success"))
        self.sink.log(name, self.counters["env_steps"], values)
        if self.run_state.callbacks:
            self.run_state.callbacks.fire(Event("update", self.run_state.run_dir, self.stage.name,
                                                self.counters["env_steps"], layer=name, metrics=dict(values)))
        if self.worker_rows_due(name):
            for w, row in rows.worker_rows(name, update_rows, results).items():
                self.sink.log(f"{name}/worker_{w}", self.counters["env_steps"], row)
        self.rounds[name] = self.rounds.get(name, 0) + 1
        self.layer_view[name].update({"optimizer_steps": server.stats.updates, "version": server.version,
                                      "kl": values.get("approx_kl", float("nan")),
                                      "clipfrac": values.get("clipfrac", float("nan"))})
        self.since_commit[name] += 1

    def worker_rows_due(self, name: str) -> bool:
        """Per-worker rows at most every log_every seconds per layer (and at a stage's end): with 16
        workers they were most of the driver's time between two updates, when no env steps."""
        now = time.perf_counter()
        if self.done or now - self.last_worker_log.get(name, -np.inf) >= self.tc.log_every:
            self.last_worker_log[name] = now
            return True
        return False
