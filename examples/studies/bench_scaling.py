"""Worker scaling with a sleep-bound simulator: training steps/s at 1..16 workers, process and ray,
and the ray backend on one Ray node against several nodes of a local cluster.

Each copy-step sleeps `step_ms` (10 ms), so one worker with one env copy trains at most ~100 env
steps/s and the speed-up measures what the backend adds, not the 2 cores. Run:
`python -m examples.studies.bench_scaling --workers 1 2 4 8 16 --backends process ray`, and for nodes
`python -m examples.studies.bench_scaling --nodes 1 2 --workers 8 16 --repeats 2` (a `ray.cluster_utils.Cluster`
on this machine whose nodes share the worker count: 16 workers = one node of 16 CPUs, or 8 + 8).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any, cast

SCENARIO = str(Path(__file__).resolve().parent / "sleepy.py")


def train_rate(backend: str, workers: int, seconds: float = 10.0, step_ms: float = 10.0,
               address: str = "", steps: int = 0, rollout: int = 32) -> float:
    """Env steps/s of the DPPO loop (start-up excluded) for a flat team on `sleepy`."""
    from hdppo.engine.config import resolve_overrides
    from hdppo.engine.spec import RunSpec
    from hdppo.engine.trainer import Trainer
    steps = steps or int(seconds * workers * 1000.0 / max(step_ms, 1.0))
    overrides = {"steps": str(steps), "workers": str(workers), "envs_per_worker": "1", "backend": backend,
                 "rollout": str(rollout), "epochs": "1", "minibatches": "1", "progress": "false", "log_every": "1000",
                 "address": address}
    tc, _ = resolve_overrides(overrides, ["low"], set())
    out = Path(tempfile.mkdtemp(prefix="hdppo-scaling-"))
    try:
        summary = Trainer(RunSpec(SCENARIO, {"layers": 1, "step_ms": step_ms}, tc, ["low"], {}, out / "run")).run()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    info = next(iter(summary.values()))
    return info["env_steps"] / info["seconds"]


def cluster_rate(nodes: int, workers: int, seconds: float = 10.0, step_ms: float = 10.0) -> dict[str, Any]:
    """`train_rate` on the ray backend joined to a local `ray.cluster_utils.Cluster` of `nodes` nodes
    with ceil(workers / nodes) CPUs each (one CPU per worker), so the workers must spread over all
    nodes. Returns the rate and how many workers each node ran."""
    import ray
    from ray.cluster_utils import Cluster

    from hdppo.engine import trainer as trainer_module
    from hdppo.engine.backends.ray import RayBackend
    per_node = math.ceil(workers / nodes)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": per_node, "include_dashboard": False})
    made: list[RayBackend] = []
    original = trainer_module.make_backend

    def capture(*args: Any, **kwargs: Any):
        made.append(cast(RayBackend, original(*args, **kwargs)))     # train_rate("ray", ...) makes Ray backends
        return made[-1]

    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=per_node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
        trainer_module.make_backend = capture
        rate = train_rate("ray", workers, seconds, step_ms, address=cluster.address)
        placed: dict[str, int] = {}
        for node in made[0].node_ids:
            placed[node] = placed.get(node, 0) + 1
        return {"rate": rate, "workers_per_node": sorted(placed.values(), reverse=True)}
    finally:
        trainer_module.make_backend = original
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--backends", nargs="+", default=["process", "ray"])
    p.add_argument("--nodes", type=int, nargs="+", default=[],
                   help="instead of backends: the ray backend on a local cluster of this many nodes "
                        "(each count in turn, interleaved, for every --workers value)")
    p.add_argument("--repeats", type=int, default=1, help="with --nodes: rounds of the interleaved runs")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rollout", type=int, nargs="+", default=[32],
                   help="env steps per rollout (several: each in turn, interleaved per worker count)")
    args = p.parse_args()
    if args.nodes:
        rows: dict[int, dict[int, list]] = {w: {n: [] for n in args.nodes} for w in args.workers}
        for _ in range(args.repeats):
            for w in args.workers:
                for n in args.nodes:
                    got = cluster_rate(n, w, args.seconds)
                    rows[w][n].append(got)
                    print(f"ray workers={w:3d} nodes={n}  {got['rate']:8.1f} steps/s  "
                          f"workers per node {got['workers_per_node']}", flush=True)
        for w in args.workers:
            best = {n: max(g["rate"] for g in rows[w][n]) for n in args.nodes}
            base = best[args.nodes[0]]
            print(f"workers={w:3d}  " + "  ".join(f"{n} node(s): {best[n]:7.1f} steps/s ({best[n] / base:4.2f}x)"
                                                  for n in args.nodes), flush=True)
        print(json.dumps({w: {n: [g["rate"] for g in rows[w][n]] for n in args.nodes} for w in args.workers}))
        return
    table: dict[str, dict[int, float]] = {}
    for backend in args.backends:
        for rollout in args.rollout:
            table[f"{backend} rollout={rollout}" if len(args.rollout) > 1 else backend] = {}
        for w in args.workers:
            for rollout in args.rollout:
                key = f"{backend} rollout={rollout}" if len(args.rollout) > 1 else backend
                table[key][w] = train_rate(backend, w, args.seconds, rollout=rollout)
                base = table[key][args.workers[0]]
                print(f"{key:20s} workers={w:3d}  {table[key][w]:8.1f} steps/s  speed-up {table[key][w] / base:5.2f}x",
                      flush=True)
    print(json.dumps(table))


if __name__ == "__main__":
    main()
