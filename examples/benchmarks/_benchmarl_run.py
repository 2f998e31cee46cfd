"""One BenchMARL run, executed by vs_benchmarl.py inside BenchMARL's own venv (never hdppo's).

BenchMARL at its published defaults (ExperimentConfig / algorithm / MLP / task YAMLs shipped with
the package); only the frame budget, the seed, the evaluation interval, the output folder and the
I/O settings (csv logger instead of wandb, no rendering, no checkpoint) are set. Task parameters
other than the YAML's are set only where the comparison fixes them (simple_spread: 25 steps).
Writes OUT/result.json: final evaluation return (BenchMARL's: per-agent mean episode return,
mean over its evaluation episodes), wall-clock, frames/s and the learning curves.
"""
from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path


def read_scalar(folder: Path, name: str) -> list[tuple[int, float]]:
    """(step, value) rows of one csv scalar BenchMARL logged (step = iteration)."""
    hits = list(folder.rglob(f"{name}.csv"))
    if not hits:
        return []
    with open(hits[0], newline="") as f:
        return [(int(float(r[0])), float(r[1])) for r in csv.reader(f) if r]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", required=True, help="a VMAS task of BenchMARL's VmasTask, e.g. balance")
    p.add_argument("--algo", required=True, choices=["mappo", "ippo"])
    p.add_argument("--frames", type=int, required=True)
    p.add_argument("--eval-interval", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--task-param", action="append", default=[], help="KEY=INT task parameter override")
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, one per core)")
    a = p.parse_args()
    if a.threads > 0:
        import torch
        torch.set_num_threads(a.threads)

    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.environments import VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = ExperimentConfig.get_from_yaml()
    cfg.max_n_frames = a.frames
    cfg.evaluation_interval = a.eval_interval
    cfg.loggers, cfg.render, cfg.checkpoint_at_end, cfg.save_folder = ["csv"], False, False, str(out)
    task = getattr(VmasTask, a.task.upper()).get_from_yaml()
    for kv in a.task_param:
        key, value = kv.split("=", 1)
        task.config[key] = int(value)
    algo = (MappoConfig if a.algo == "mappo" else IppoConfig).get_from_yaml()
    exp = Experiment(task=task, algorithm_config=algo, model_config=MlpConfig.get_from_yaml(),
                     critic_model_config=MlpConfig.get_from_yaml(), seed=a.seed, config=cfg)
    start = time.perf_counter()
    exp.run()
    wall = time.perf_counter() - start
    frames_per_iter = cfg.on_policy_collected_frames_per_batch
    evals = read_scalar(out, "eval_reward_episode_reward_mean")
    train = read_scalar(out, "collection_reward_episode_reward_mean")
    result = {
        "framework": "benchmarl", "arm": f"benchmarl_{a.algo}", "task": a.task, "seed": a.seed,
        "frames": int(exp.total_frames), "wall_s": wall, "fps": exp.total_frames / wall,
        "final_return": evals[-1][1] if evals else None,
        "eval_curve": [((s + 1) * frames_per_iter, v) for s, v in evals],
        "train_curve": [((s + 1) * frames_per_iter, v) for s, v in train],
        "task_config": dict(task.config), "gamma": cfg.gamma, "eval_episodes": cfg.evaluation_episodes,
        "deterministic_eval": cfg.evaluation_deterministic_actions,
        "torch_threads": __import__("torch").get_num_threads(),
        "timers": {k: sum(v for _, v in read_scalar(out, f"timers_{k}_time"))
                   for k in ("collection", "training", "evaluation")},
    }
    (out / "result.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
