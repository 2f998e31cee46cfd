"""`--backend ray` survives lost workers: a dead actor is recreated, re-synced and its call issued again,
the step counters stay exact, a worker that keeps dying ends the run with a WorkerError naming it, and
training goes on when a node of a cluster is removed.

Every test starts its own Ray (a local instance, or a `ray.cluster_utils.Cluster`) and shuts it down.
"""
from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

import hdppo.engine.loop  # noqa: E402
import hdppo.engine.trainer  # noqa: E402
from hdppo.engine.backends import WorkerError  # noqa: E402
from hdppo.engine.backends.ray import RayBackend  # noqa: E402
from hdppo.engine.checkpoint import load_checkpoint  # noqa: E402
from hdppo.engine.config import resolve_overrides, train_config_to_dict  # noqa: E402
from hdppo.engine.spec import RunSpec  # noqa: E402
from hdppo.engine.trainer import Trainer  # noqa: E402
from hdppo.engine.worker import WorkerSpec  # noqa: E402
from hdppo.team.scenario import load_scenario  # noqa: E402
from tests.helpers import TESTS  # noqa: E402

# The failing_env fixture with a commander over two units (`layers=2`): an env copy kills its process
# at step `at` (`fail=exit`): every time when `marker` is "", else only the first copy to create it.
FAILING_ENV = TESTS / "fixtures" / "failing_env.py"
DYING = {"layers": 2, "fail": "exit"}

LAYERS = ["high", "low"]
WORKERS, ENVS, ROLLOUT = 2, 2, 16
ROUND = WORKERS * ENVS * ROLLOUT          # env steps of one sync round (every worker collects once)
# "low" is due after every collect, "high" after every 3rd: a restarted worker must fall due with the others
COMMON = dict(workers=WORKERS, envs_per_worker=ENVS, rollout=ROLLOUT, **{"high.rollout": 3 * ROLLOUT},
              epochs=2, minibatches=2, seed=0, progress="false", log_every=0)


@pytest.fixture
def scenario() -> Path:
    return FAILING_ENV


class Made(list):
    """The RayBackends the trainer built, and the options (`options`) a test wants them built with."""

    def __init__(self) -> None:
        super().__init__()
        self.options: dict = {}


@pytest.fixture
def made(monkeypatch) -> Made:
    backends = Made()

    def make_backend(name, specs, layer_sizes, **_options):
        assert name == "ray"
        backends.append(RayBackend(specs, layer_sizes, **backends.options))
        return backends[-1]

    monkeypatch.setattr(hdppo.engine.trainer, "make_backend", make_backend)
    return backends


def train(out: Path, scenario: Path, **overrides) -> Trainer:
    sc = load_scenario(str(scenario))
    keys = set(sc.make_config().__dataclass_fields__)
    tc, scen = resolve_overrides({k: str(v) for k, v in {**COMMON, **DYING, **overrides}.items()}, LAYERS, keys)
    t = Trainer(RunSpec(str(scenario), scen, tc, LAYERS, {}, out))
    t.run()
    return t


def wait_gone(pid: int, timeout: float) -> bool:
    """Whether the process ends (or is left a zombie) within `timeout` seconds."""
    import psutil
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def check_exact_steps(run: Path, steps: int) -> list[dict[str, str]]:
    """Every sync round counted exactly once: no lost or doubled steps, and updates as without a failure."""
    state = json.loads((run / "state.json").read_text())
    assert state["finished"] is True
    rounds = -(-steps // ROUND)
    assert state["env_steps"] == rounds * ROUND >= steps
    run_rows = rows(run / "metrics" / "run.csv")
    counted = [int(float(r["env_steps"])) for r in run_rows]
    assert counted == [ROUND * (i + 1) for i in range(rounds)]          # one row per round (log_every=0)
    assert counted[-1] == state["env_steps"]
    per_round = 2 * 2                                                     # epochs x minibatches
    for layer, updates in (("low", rounds), ("high", rounds // 3)):
        meta = load_checkpoint(run / "checkpoints" / layer)[1]
        assert meta["updates"] == updates * per_round
        assert meta["stat_versions"] == updates                          # value_norm statistics, once an update
        assert meta["version"] == meta["updates"] + meta["stat_versions"]
    return run_rows


@pytest.mark.timeout(120)
def test_a_killed_worker_is_restarted_and_counted_once(tmp_path, scenario, own_ray, made):
    """One env copy kills its worker's process in the 3rd collect (env step 40 of 48), while "high" is
    2/3 through its rollout. The worker comes back, is re-synced, collects again, and the run ends
    with exactly the steps of the rounds it ran."""
    steps = 10 * ROUND
    t = train(tmp_path / "run", scenario, backend="ray", steps=steps, at=40, marker=tmp_path / "died")
    assert not ray.is_initialized()
    assert (tmp_path / "died").exists()
    (backend,) = made
    assert sum(backend.restarts) == 1
    (event,) = backend.restart_log
    w = event["worker"]
    assert backend.restarts[w] == 1 and event["method"] == "collect"
    run_rows = check_exact_steps(t.out, steps)
    # the restarted worker keeps reporting: in every run row, and in its per-layer rows after the restart
    assert all(r.get(f"worker_{w}_sps") for r in run_rows)
    low = rows(t.out / "metrics" / f"low__worker_{w}.csv")
    assert [int(r["step"]) for r in low] == [ROUND * (i + 1) for i in range(10)]
    high = {v: rows(t.out / "metrics" / f"high__worker_{v}.csv") for v in (w, 1 - w)}
    assert [int(r["step"]) for r in high[w]] == [3 * ROUND, 6 * ROUND, 9 * ROUND]
    # its first "high" batch after the restart holds only the steps it collected since (a third), the
    # others are whole
    first = [float(high[v][0]["transitions"]) for v in (w, 1 - w)]
    assert 0 < first[0] < first[1] == float(high[1 - w][1]["transitions"]) == float(high[w][1]["transitions"])


@pytest.mark.timeout(120)
def test_a_worker_that_keeps_dying_is_named_once_its_restarts_are_used(tmp_path, scenario, own_ray, made):
    # through the trainer, restarts off: the first death ends the run, and the trainer stops Ray
    made.options["max_restarts"] = 0
    t0 = time.monotonic()
    with pytest.raises(WorkerError) as info:
        train(tmp_path / "run", scenario, backend="ray", steps=10 * ROUND, at=3)
    assert time.monotonic() - t0 < 60
    assert re.search(r"worker [01] \(Ray actor on node \w+\) died during collect; restarts are off "
                     r"\(max_restarts=0\); last error: ", info.value.problem), info.value.problem
    assert not ray.is_initialized()
    assert json.loads((tmp_path / "run" / "state.json").read_text())["finished"] is False

    # one worker of two always dies: after its one restart it is named, and the healthy one is unharmed
    tc, _ = resolve_overrides({k: str(v) for k, v in COMMON.items()}, LAYERS, set())
    specs = [WorkerSpec(str(scenario), {**DYING, "at": at}, train_config_to_dict(tc), w, LAYERS)
             for w, at in enumerate([-1, 3])]
    backend = RayBackend(specs, {}, max_restarts=1)
    try:
        first_pid = backend.pids[1]
        t0 = time.monotonic()
        with pytest.raises(WorkerError) as info:
            backend.call([0, 1], "collect")
        assert time.monotonic() - t0 < 60
        problem = info.value.problem
        assert re.search(r"worker 1 \(Ray actor on node \w+\) died during collect; restarts used: 1 of 1; "
                         r"last error: .+", problem), problem
        assert backend.restarts == [0, 1] and backend.pids[1] != first_pid
        assert [e["worker"] for e in backend.restart_log] == [1]
        assert backend.call([0], "collect")[0].env_steps == ENVS * ROLLOUT    # the healthy worker still answers
    finally:
        backend.close()
    assert not ray.is_initialized()


@pytest.mark.timeout(120)
def test_a_stopped_worker_is_restarted_after_its_deadline(tmp_path, scenario, own_ray):
    """A SIGSTOPped actor never answers: past worker_timeout it is killed and restarted like a dead
    one, and the call comes back from the new actor (issue 13)."""
    import os
    import signal
    tc, _ = resolve_overrides({k: str(v) for k, v in COMMON.items()}, LAYERS, set())
    specs = [WorkerSpec(str(scenario), {**DYING, "at": -1}, train_config_to_dict(tc), w, LAYERS) for w in range(2)]
    backend = RayBackend(specs, {}, max_restarts=1)
    backend.timeouts = {"collect": 3.0}
    try:
        stopped = backend.pids[1]
        os.kill(stopped, signal.SIGSTOP)
        t0 = time.monotonic()
        answers = backend.call([0, 1], "collect")
        took = time.monotonic() - t0
        assert [a.env_steps for a in answers] == [ENVS * ROLLOUT] * 2
        assert 3.0 <= took < 60, took
        assert backend.restarts == [0, 1] and backend.pids[1] != stopped
        (event,) = backend.restart_log
        assert event["method"] == "collect" and "worker_timeout" in event["error"]
        assert wait_gone(stopped, 30)                       # the stopped actor was killed, not left behind
    finally:
        try:
            os.kill(stopped, signal.SIGKILL)
        except OSError:
            pass
        backend.close()


@pytest.mark.timeout(120)
def test_training_goes_on_when_a_node_is_removed(tmp_path, scenario, own_ray, made, monkeypatch):
    """Two nodes of 2 CPUs, one worker (1 CPU) on each. After the 2nd round's collect the worker node is
    removed: that worker's next call (a gradient) fails, it is recreated on the head node with no batch
    (n=0 gradients until its next collect), and training finishes with exact counts."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        other = cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        head = cluster.head_node.node_id
        made.options.update(address=cluster.address, num_cpus_per_worker=1)
        removed: list[int] = []
        collect_done = hdppo.engine.loop.StageLoop.after_collect

        def after_collect(loop, results):
            collect_done(loop, results)
            if loop.counters["env_steps"] == 2 * ROUND and not removed:
                (backend,) = made
                assert sorted(backend.node_ids) == sorted([head, other.node_id])   # one worker on each
                removed.append(backend.node_ids.index(other.node_id))
                cluster.remove_node(other, allow_graceful=False)
                # a lost machine takes its processes with it; here the actor's process notices its raylet
                # is gone and exits within a few seconds: wait for that, so its next call fails
                assert wait_gone(backend.pids[removed[0]], 30.0)

        monkeypatch.setattr(hdppo.engine.loop.StageLoop, "after_collect", after_collect)
        steps = 8 * ROUND
        t = train(tmp_path / "run", scenario, backend="ray", steps=steps)
        (backend,) = made
        (w,) = removed
        assert backend.restarts[w] == 1 and sum(backend.restarts) == 1
        (event,) = backend.restart_log
        assert event["node_id"] == other.node_id and event["method"] == "gradient"
        assert backend.node_ids == [head, head]
        check_exact_steps(t.out, steps)
        assert ray.is_initialized()                              # joined, not started: left running
    finally:
        ray.shutdown()
        cluster.shutdown()
