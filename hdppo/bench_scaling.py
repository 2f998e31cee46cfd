"""Worker scaling with a sleep-bound simulator: training steps/s at 1..16 workers, process and ray.

Each copy-step sleeps `step_ms` (10 ms), so one worker with one env copy trains at most ~100 env
steps/s and the speed-up measures what the backend adds, not the 2 cores. Run:
`python -m hdppo.bench_scaling --workers 1 2 4 8 16 --backends process ray`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

SCENARIO = str(Path(__file__).resolve().parent / "bench_scenarios" / "sleepy.py")


def train_rate(backend: str, workers: int, seconds: float = 10.0, step_ms: float = 10.0,
               address: str = "") -> float:
    """Env steps/s of the DPPO loop (start-up excluded) for a flat team on `sleepy`."""
    from .train_config import resolve_overrides
    from .trainer import RunSpec, Trainer
    steps = int(seconds * workers * 1000.0 / step_ms)
    overrides = {"steps": str(steps), "workers": str(workers), "envs_per_worker": "1", "backend": backend,
                 "rollout": "32", "epochs": "1", "minibatches": "1", "progress": "false", "log_every": "1000",
                 "address": address}
    tc, _ = resolve_overrides(overrides, ["low"], set())
    out = Path(tempfile.mkdtemp(prefix="hdppo-scaling-"))
    try:
        summary = Trainer(RunSpec(SCENARIO, {"layers": 1, "step_ms": step_ms}, tc, ["low"], {}, out / "run")).run()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    info = next(iter(summary.values()))
    return info["env_steps"] / info["seconds"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--backends", nargs="+", default=["process", "ray"])
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    table: dict[str, dict[int, float]] = {}
    for backend in args.backends:
        table[backend] = {}
        for w in args.workers:
            table[backend][w] = train_rate(backend, w, args.seconds)
            base = table[backend][args.workers[0]]
            print(f"{backend:8s} workers={w:3d}  {table[backend][w]:8.1f} steps/s  speed-up {table[backend][w] / base:5.2f}x",
                  flush=True)
    print(json.dumps(table))


if __name__ == "__main__":
    main()
