"""VMAS on CPU and on CUDA, side by side in one run: the adapter's stepping alone, then hdppo training.

    python examples/benchmarks/vmas_device.py [--envs 600 4096] [--steps 100000] [--out runs/vmas_device]

Prints frames/s of `VmasBatch` stepping random actions (balance, navigation) for each device and
copy count, and of `hdppo train vmas_balance` with the simulator on each device (`sim_device`), the
learner on the same device in experience mode (`device=`, `mode=experience`). The policies act on
the CPU in both cases: with `sim_device=cuda` each step's observations cross to the host once.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import numpy as np


def step_rate(task: str, n_envs: int, device: str, seconds: float = 4.0) -> float:
    """Frames (copies x steps) per second of the adapter stepping random actions."""
    from hdppo.sims import VmasBatch
    env = VmasBatch(task, n_envs, device=device, seed=0)
    rng = np.random.default_rng(0)
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        raise SystemExit(f"{task} gives discrete actions; this benchmark steps continuous ones: pick a task "
                         "with continuous actions (VMAS's default)")
    low, high = space.low, space.high
    shape = (n_envs, len(env.units)) + space.shape
    env.reset(seed=0)
    for _ in range(5):
        env.step(rng.uniform(low, high, shape).astype(np.float32))
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        result = env.step(rng.uniform(low, high, shape).astype(np.float32))
        env.reset_done(result.done)
        steps += 1
    rate = steps * n_envs / (time.perf_counter() - t0)
    env.close()
    return rate


def train_rate(device: str, steps: int, envs: int, out: Path) -> dict:
    """hdppo training on vmas_balance with simulator and learner on `device`: frames/s and final return."""
    import hdppo
    from hdppo.engine.metrics import read_csv
    t0 = time.perf_counter()
    run = hdppo.train("vmas_balance", {"steps": steps, "workers": 1, "backend": "inline", "envs_per_worker": envs,
                                        "sim_device": device, "device": device, "mode": "experience", "seed": 0},
                      out=out / f"balance-{device}")
    seconds = time.perf_counter() - t0
    last = [r["team_return"] for r in read_csv(run, "run") if "team_return" in r][-5:]
    return {"frames_per_s": steps / seconds, "seconds": seconds,
            "team_return_last": float(np.nanmean(last)) if last else float("nan")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, nargs="+", default=[600, 4096])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--train-envs", type=int, default=600)
    p.add_argument("--out", default="runs/vmas_device")
    args = p.parse_args()
    import torch
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    report: dict = {"devices": devices, "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name(0) if "cuda" in devices else None, "step": {}, "train": {}}
    for task in ("balance", "navigation"):
        for n in args.envs:
            for device in devices:
                rate = step_rate(task, n, device)
                report["step"][f"{task}/{n}/{device}"] = rate
                print(f"step {task:<10} {n:>5} copies {device:<4} {rate:>12,.0f} frames/s", flush=True)
    for device in devices:
        got = train_rate(device, args.steps, args.train_envs, Path(args.out))
        report["train"][device] = got
        print(f"train vmas_balance {args.steps:,} steps, {args.train_envs} copies, {device}: "
              f"{got['frames_per_s']:,.0f} frames/s, team return (last rows) {got['team_return_last']:.3f}", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "report.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
