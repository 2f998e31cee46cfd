"""hdppo side by side with BenchMARL (MAPPO, IPPO) on VMAS tasks, same machine, same frame budget.

    python examples/benchmarks/vs_benchmarl.py --frames 1002000 --seeds 3
    python examples/benchmarks/vs_benchmarl.py --frames 24000 --seeds 1 --tasks balance --write /tmp/smoke

Run it with hdppo's venv active (it needs `hdppo` and vmas). BenchMARL lives in its own venv,
`.venv-benchmarl/` at the repository root, made on first use (`benchmarl==1.5.2`, `vmas==1.5.2`
and the torch version of hdppo's venv, CPU; BenchMARL is never installed into hdppo's venv).

Arms: `benchmarl_mappo`, `benchmarl_ippo` (BenchMARL's published default configs, only the frame
budget, seed and evaluation interval set; see _benchmarl_run.py), `hdppo_flat` (hdppo's default:
shared policy, centralized critic), `hdppo_flat_decentralized` (`centralized=false`, IPPO-like),
`hdppo_flat_epochs4` (`epochs=4 lr_decay=true clip_vloss=false`, hdppo's default before 16 epochs,
a constant learning rate and a clipped value loss: each collected step used 4 times, not 16;
MAPPO's default uses each frame 45 times. It measures what sample reuse changes),
`hdppo_squads` (`layers=3`: commander -> squads of 2 -> units with learned discrete goals, no
intrinsic reward; only tasks with 4+ agents). Tasks: VMAS balance, navigation, transport (BenchMARL's
default task parameters, both sides) and simple_spread (VMAS's port of MPE simple_spread on BOTH
sides, 3 agents, 25 steps: BenchMARL's PettingZoo MPE tasks import `pettingzoo.mpe`, gone from
pettingzoo 1.25+, and VMAS keeps the two sides on one simulator). Both sides: gamma 0.99, continuous
actions, the same max steps.

"Return" is BenchMARL's: an agent's rewards summed over an episode, averaged over agents, then over
the evaluation episodes (10, deterministic actions, on both sides). hdppo's team return (the sum
over units) is divided by the number of agents. Curves are training-episode returns (BenchMARL's
`collection/reward/episode_reward_mean`, hdppo's run.csv `team_return` / agents) against frames.
A frame is one env step of one copy (all agents act), on both sides. BenchMARL collects 6000
frames per iteration, so the budget is rounded up to a multiple of 6000; hdppo runs whole
collection rounds (2,048 steps with 2 workers x 16 copies) and its exact count is recorded.
Wall-clock is the whole training process on both sides (start-up included); BenchMARL's includes
its periodic evaluations, hdppo's final evaluation is not included.

Finished runs (RUNS/TASK/ARM/seed_S/result.json, or the records of the report's data file
WRITE/PAGE-runs.json, so a comparison can go on over several sittings or machines) are reused;
`--fresh` redoes them; `--report-only` trains nothing and reports the finished runs it finds,
listing the missing ones at the top.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies.evidence import OLD_SCHEDULES
from hdppo import provenance

ROOT = Path(__file__).resolve().parents[2]
BENCHMARL_VENV = ROOT / ".venv-benchmarl"
BENCHMARL_PACKAGES = ["benchmarl==1.5.2", "vmas==1.5.2"]
FRAMES_PER_BATCH = 6000          # BenchMARL's on_policy_collected_frames_per_batch default
FULL_FRAMES = 1_000_000          # the budget of the full comparison; less is labelled "reduced budget"
TARGET_WALL = 5.0                # the target: at least this many times less wall-clock than BenchMARL MAPPO
SMOKE_FRAMES = 60_000            # below this (or under 3 seeds) a report is labelled a smoke run
# task -> (hdppo scenario, number of agents, task parameters fixed on both sides beyond BenchMARL's YAML)
TASKS = {
    "balance": ("vmas_balance", 4, {}),
    "navigation": ("vmas_navigation", 3, {}),
    "transport": ("vmas_transport", 4, {}),
    "simple_spread": ("vmas_simple_spread", 3, {"max_steps": 25}),
}
OTHER_TASKS: dict[str, tuple[str, int, dict]] = {}    # other VMAS tasks, filled by task_spec
ARMS = ["benchmarl_mappo", "benchmarl_ippo", "hdppo_flat", "hdppo_flat_decentralized", "hdppo_flat_epochs4",
        "hdppo_squads"]
HDPPO_ARGS = {"hdppo_flat": [], "hdppo_flat_decentralized": ["centralized=false"],
              "hdppo_flat_epochs4": ["epochs=4", *OLD_SCHEDULES],
              "hdppo_squads": ["--layer", "all", "layers=3", "squad_size=2"]}


def benchmarl_task_yaml(task: str) -> Path:
    """BenchMARL's task parameters for a VMAS task, as its package ships them (conf/task/vmas/TASK.yaml)."""
    found = sorted(BENCHMARL_VENV.glob(f"lib/python*/site-packages/benchmarl/conf/task/vmas/{task}.yaml"))
    if not found:
        known = sorted(p.stem for p in BENCHMARL_VENV.glob("lib/python*/site-packages/benchmarl/conf/task/vmas/*.yaml"))
        sys.exit(f"unknown task {task!r}: neither {', '.join(TASKS)} nor a VMAS task of BenchMARL's "
                 f"({', '.join(known) or 'make its venv first: run any BenchMARL arm once'})")
    return found[0]


def task_spec(task: str, runs: Path) -> tuple[str, int, dict]:
    """(hdppo scenario, agents, parameters fixed on both sides) of a task. The four built-in tasks have
    scenarios of their own; any other VMAS task runs at BenchMARL's task parameters on both sides, hdppo's
    through a scenario file written to RUNS/TASK/vmas_TASK.py from the same YAML."""
    if task in TASKS:
        return TASKS[task]
    if task not in OTHER_TASKS:
        import yaml
        params = {k: v for k, v in yaml.safe_load(benchmarl_task_yaml(task).read_text()).items() if k != "defaults"}
        path = runs / task / f"vmas_{task}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (f'"""vmas_{task}: VMAS {task} at BenchMARL\'s task parameters (benchmarl/conf/task/vmas/{task}.yaml),\n'
                f'written by examples/benchmarks/vs_benchmarl.py."""\nfrom hdppo.sims import vmas_scenario\n\n'
                f'SCENARIO = vmas_scenario({task!r}, name="vmas_{task}", squad_size=2, **{params!r})\n')
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        from hdppo.team.scenario import load_scenario
        scenario = load_scenario(str(path))
        n_agents = len(scenario.env(scenario.config()).possible_agents)
        OTHER_TASKS[task] = (str(path), n_agents, {})
    return OTHER_TASKS[task]


def sh(cmd: list[str], log: Path | None = None, env: dict | None = None) -> float:
    """Run a command (output to `log`), fail loudly; the wall-clock seconds it took."""
    start = time.perf_counter()
    with open(log, "w") if log else open(os.devnull, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        sys.exit(f"failed (exit {rc}): {shlex.join(cmd)}" + (f"\n  see {log}" if log else ""))
    return time.perf_counter() - start


def benchmarl_python() -> Path:
    return BENCHMARL_VENV / "bin" / "python"


def ensure_benchmarl() -> Path:
    """BenchMARL's own venv, made on first use with hdppo's torch version (CPU) pinned."""
    python = benchmarl_python()
    if python.exists():
        return python
    import torch
    torch_pin = f"torch=={torch.__version__.split('+')[0]}"
    print(f"making BenchMARL's venv {BENCHMARL_VENV} ({torch_pin}, {', '.join(BENCHMARL_PACKAGES)})", flush=True)
    sh([sys.executable, "-m", "venv", str(BENCHMARL_VENV)])
    sh([str(python), "-m", "pip", "install", "-q", torch_pin, *BENCHMARL_PACKAGES])
    return python


def versions(python: str) -> dict[str, str]:
    code = ("import importlib.metadata as m, json\nv = {}\n"
            "for p in ('torch', 'vmas', 'benchmarl', 'torchrl', 'tensordict', 'hdppo', 'numpy'):\n"
            "    try:\n        v[p] = m.version(p)\n    except m.PackageNotFoundError:\n        pass\n"
            "print(json.dumps(v))")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}    # what the venv itself holds
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/", env=clean)
    return json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-200:]}


def commit() -> str:
    """This checkout's commit and the files that differ from it, as run folders record them."""
    return provenance.describe_commit(provenance.provenance())


# ---- one run ---------------------------------------------------------------------------------------
def run_benchmarl(python: Path, task: str, arm: str, seed: int, frames: int, interval: int, folder: Path,
                  threads: int) -> None:
    params = [f"--task-param={k}={v}" for k, v in task_spec(task, folder.parents[2])[2].items()]
    cmd = [str(python), str(Path(__file__).with_name("_benchmarl_run.py")), "--task", task,
           "--algo", arm.split("_")[1], "--frames", str(frames), "--eval-interval", str(interval),
           "--seed", str(seed), "--out", str(folder), "--threads", str(threads), *params]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads > 0 else None
    wall = sh(cmd, folder / "log.txt", env)
    result = json.loads((folder / "result.json").read_text())
    result.update(process_wall_s=wall, command=shlex.join(cmd))      # wall_s: BenchMARL's Experiment.run alone
    (folder / "result.json").write_text(json.dumps(result, indent=1))


def as_module(cmd: list[str]) -> list[str]:
    """`hdppo ...` run by this interpreter (its venv need not be on PATH); reports keep the `hdppo` form."""
    return [sys.executable, "-m", "hdppo.cli", *cmd[1:]]


def hdppo_command(task: str, arm: str, seed: int, frames: int, folder: Path, extra: list[str]) -> list[str]:
    """The `hdppo train` command of one hdppo run (its run folder is FOLDER/run)."""
    scenario, _, fixed = task_spec(task, folder.parents[2])
    return ["hdppo", "train", scenario, "--steps", str(frames), "--seed", str(seed), "--no-progress",
            "--out", str(folder / "run"), *HDPPO_ARGS[arm], *[f"{k}={v}" for k, v in fixed.items()], *extra]


def changed_since(task: str, arm: str, seed: int, frames: int, folder: Path, extra: list[str],
                  record: dict | None = None) -> list[str]:
    """Settings where a finished hdppo run differs from what its command gives with this code (e.g. a
    default changed since it ran), read from its run folder or, for a record kept in the report's data
    file, from the config the record kept; empty for BenchMARL arms."""
    if arm.startswith("benchmarl"):
        return []
    from examples.studies.same_run import changed_from, changed_settings
    argv = hdppo_command(task, arm, seed, frames, folder, extra)[2:]
    if (folder / "run" / "config.json").exists():
        return changed_settings(folder / "run", argv)
    if record and "config" in record:
        return changed_from(record["config"], argv)
    return ["the run's settings (no run folder, and the record kept no config)"]


def run_hdppo(task: str, arm: str, seed: int, frames: int, folder: Path, extra: list[str]) -> None:
    from hdppo.runfolder import load_run_config
    n_agents = task_spec(task, folder.parents[2])[1]
    run = folder / "run"
    cmd = hdppo_command(task, arm, seed, frames, folder, extra)
    wall = sh(as_module(cmd), folder / "log.txt")
    ev = ["hdppo", "eval", str(run), "--episodes", "10", "--deterministic", "--json", "--seed", str(1000 + seed)]
    out = subprocess.run(as_module(ev), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {shlex.join(ev)}\n{out.stderr[-2000:]}")
    evaluation = json.loads(out.stdout[out.stdout.index("{"):])
    import csv
    with open(run / "metrics" / "run.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps = int(float(rows[-1]["env_steps"])) if rows else frames
    curve = [(int(float(r["env_steps"])), float(r["team_return"]) / n_agents) for r in rows
             if r.get("team_return") not in (None, "", "nan")]
    import re
    trained = re.findall(r"env steps in ([\d.]+) s", (folder / "log.txt").read_text())
    result = {"framework": "hdppo", "arm": arm, "task": task, "seed": seed, "frames": steps,
              "wall_s": sum(float(t) for t in trained) if trained else wall,
              "process_wall_s": wall, "fps": steps / wall, "final_return": evaluation["team_return"][0] / n_agents,
              "train_curve": curve, "eval_curve": [(steps, evaluation["team_return"][0] / n_agents)],
              "command": shlex.join(cmd), "eval_command": shlex.join(ev), "gamma": 0.99, "eval_episodes": 10,
              "config": {k: v for k, v in load_run_config(run).items() if k in ("train", "scenario_config", "layers")},
              "deterministic_eval": True}
    (folder / "result.json").write_text(json.dumps(result, indent=1))


def arms_for(task: str, arms: list[str], runs: Path) -> list[str]:
    return [a for a in arms if a != "hdppo_squads" or task_spec(task, runs)[1] >= 4]


# ---- the report ------------------------------------------------------------------------------------
def plot(task: str, results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (arm, runs) in enumerate(results.items()):
        for k, r in enumerate(runs):
            if r["train_curve"]:
                x, y = zip(*r["train_curve"])
                ax.plot(x, y, color=f"C{i}", alpha=0.8, lw=1.2, ls="-" if arm.startswith("hdppo") else "--",
                        label=arm if k == 0 else None)
            if r["eval_curve"]:
                fx, fy = r["eval_curve"][-1]
                ax.plot([fx], [fy], marker="o", color=f"C{i}")
    ax.set_xlabel("frames (env steps of one copy)")
    ax.set_ylabel("per-agent episode return")
    ax.set_title(f"{task}: training returns (lines), final deterministic evaluation (dots)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt(x: float | None) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def finals_of(runs: list[dict]) -> list[float]:
    return [r["final_return"] for r in runs if r["final_return"] is not None]


def start_end(runs: list[dict], frames: int) -> tuple[float, float]:
    """Training return averaged over each seed's first and last 10% of frames, then over seeds: did it learn?
    A seed that logged no point in its first 10% (hdppo writes a row every few seconds, so a fast run's first
    row can come later) counts its first logged point instead."""
    def window(r: dict, inside) -> float:
        ys = [y for x, y in r["train_curve"] if inside(x)]
        return float(np.mean(ys)) if ys else float("nan")
    first = [window(r, lambda x, r=r: x <= max(0.1 * frames, r["train_curve"][0][0] if r["train_curve"] else 0))
             for r in runs]
    last = [window(r, lambda x: x >= 0.9 * frames) for r in runs]
    return float(np.nanmean(first)) if np.isfinite(first).any() else float("nan"), \
        float(np.nanmean(last)) if np.isfinite(last).any() else float("nan")


def verdict_vs(mean: float, mappo: tuple[float, float, float]) -> str:
    """The target, per arm: final return at least MAPPO's (`above`) or inside MAPPO's interval (`inside`)."""
    if not np.isfinite(mean):
        return "-"
    return "above" if mean >= mappo[0] else "inside" if mean >= mappo[1] else "below"


def summary(verdicts: dict[str, dict[str, tuple[str, str, float | None]]]) -> list[str]:
    """The targets, task by task, and for each hdppo arm over the tasks: final return at least MAPPO's or inside
    its interval, and at least TARGET_WALL times less wall-clock. `verdicts[task][arm]` = (return - MAPPO,
    verdict, wall-clock ratio); a verdict "-" (no MAPPO run) is not counted."""
    if not verdicts:
        return []
    lines = ["## Summary", "", f"Targets: final return at least MAPPO's or inside its interval (verdict `above` or "
             f"`inside`), and at least {TARGET_WALL:g}x less wall-clock than MAPPO on the same cores.", "",
             "| task | arm | return - MAPPO [95% CI] | verdict | wall vs MAPPO |", "|---|---|---|---|---|"]
    by_arm: dict[str, dict[str, tuple[str, str, float | None]]] = {}
    for task, arms in verdicts.items():
        for arm, (vs, verdict, ratio) in arms.items():
            lines.append(f"| {task} | {arm} | {vs} | {verdict} | {fmt_ratio(ratio)} |")
            if verdict != "-":
                by_arm.setdefault(arm, {})[task] = (vs, verdict, ratio)
    lines.append("")
    for arm, judged in by_arm.items():
        missed = [t for t, v in judged.items() if v[1] not in ("above", "inside")]
        fast = [t for t, v in judged.items() if v[2] is not None and v[2] >= TARGET_WALL]
        lines.append(f"- `{arm}`: return target on {len(judged) - len(missed)} of {len(judged)} tasks"
                     + (f" (not on {', '.join(missed)})" if missed else "")
                     + f"; wall-clock target on {len(fast)} of {len(judged)}.")
    return lines + [""]


def report(results: dict, args: argparse.Namespace, out: Path, command: str, bm_python: Path | None,
           missing: list[str] | None = None) -> Path:
    from hdppo.stats import diff_ci, mean_ci
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    if missing:
        lines += [f"> **Incomplete**: {len(missing)} run(s) of the command below are missing and not in the "
                  f"tables: {', '.join(missing)}.", ""]
    if args.frames < SMOKE_FRAMES or len(args.seed_list) < 3:
        lines += [f"> **Smoke run, not evidence**: {args.frames:,} frames per run, {len(args.seed_list)} seed(s). "
                  f"Evidence needs 3+ seeds and >= {FULL_FRAMES:,} frames per run.", ""]
    elif args.frames < FULL_FRAMES:
        lines += [f"> **Reduced budget**: {args.frames:,} frames per run, {len(args.seed_list)} seeds. What the "
                  f"tables show holds at this budget only; the full comparison runs {FULL_FRAMES:,} frames.", ""]
    lines += ["# hdppo vs BenchMARL on VMAS", "",
              f"Budget: {args.frames:,} frames per run (BenchMARL rounds to its 6,000-frame batches; hdppo to whole "
              f"collection rounds: the frames column says what ran), seeds {args.seed_list}, "
              f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} when the report was written. BenchMARL torch threads: "
              f"{args.benchmarl_threads or 'torch default'}; hdppo: its default workers, 1 torch thread each"
              + (f", and **not its defaults**: `{' '.join(args.hdppo_set)}`" if args.hdppo_set else "") + ".", "",
              "Command:", "", "```bash", command, "```", "",
              f"Commit: `{commit()}`. hdppo venv: `{json.dumps(versions(sys.executable))}`. "
              f"BenchMARL venv: `{json.dumps(versions(str(bm_python)) if bm_python else 'not used')}`.", "",
              "Return: an agent's rewards summed over an episode, averaged over agents and over 10 deterministic "
              "evaluation episodes after training (BenchMARL's `eval/reward/episode_reward_mean` at its last "
              "evaluation; hdppo's `hdppo eval --deterministic` team return / agents). Interval: percentile "
              "bootstrap over the seeds' final returns, task by task (a stratified bootstrap with one stratum "
              "per task; one seed has none). Wall-clock: the training process, start-up included (frames/s "
              "and the ratio use it; ratio = benchmarl_mappo's mean wall-clock / the arm's); training s: "
              "BenchMARL's `Experiment.run()` (its periodic evaluations included), hdppo's training stages "
              "as its log reports them (start-up and the final evaluation excluded). Return - MAPPO: the "
              "difference of the seed means with a Welch t interval across both arms' seeds; verdict: "
              "`above` (mean at least MAPPO's), `inside` (below MAPPO's mean, inside its interval) or `below`. "
              "Training return first -> last: the training curve averaged over each seed's first and last 10% "
              "of the frames (or its first logged point, where a run logged none in its first 10%), then over "
              "seeds (whether an arm learned at all at this budget).", ""]
    sections: list[str] = []
    verdicts: dict[str, dict[str, tuple[str, str, float | None]]] = {}
    for task, by_arm in results.items():
        sections += [f"## {task}", "", f"![{task}]({png_name(args.page, task)})", "",
                     "| arm | frames | final return per seed | mean [95% CI] | return - MAPPO [95% CI] | verdict "
                     "| training return, first -> last 10% | wall-clock s | training s | frames/s | wall vs MAPPO |",
                     "|" + "---|" * 11]
        ref = by_arm.get("benchmarl_mappo")
        ref_wall = float(np.mean([r["process_wall_s"] for r in ref])) if ref else None
        ref_finals = finals_of(ref or [])
        ref_ci = mean_ci(ref_finals) if ref_finals else None
        for arm, runs in by_arm.items():
            finals = finals_of(runs)
            m, lo, hi = mean_ci(finals) if finals else (float("nan"),) * 3
            wall = float(np.mean([r["process_wall_s"] for r in runs]))
            ci = f"{fmt(m)} [{fmt(lo)}, {fmt(hi)}]" if len(finals) > 1 else fmt(m)
            d, dlo, dhi = diff_ci(finals, ref_finals)
            vs = "-" if arm == "benchmarl_mappo" or not ref_finals else (
                f"{fmt(d)} [{fmt(dlo)}, {fmt(dhi)}]" if np.isfinite(dlo) else fmt(m - float(np.mean(ref_finals))))
            verdict = "-" if arm == "benchmarl_mappo" or ref_ci is None else verdict_vs(m, ref_ci)
            ratio = ref_wall / wall if ref_wall else None
            train = float(np.mean([r["wall_s"] for r in runs]))
            first, last = start_end(runs, args.frames)
            if arm.startswith("hdppo"):        # the targets are hdppo's; IPPO's row stays in the task's table
                verdicts.setdefault(task, {})[arm] = (vs, verdict, ratio)
            sections.append(f"| {arm} | {runs[0]['frames']:,} | {', '.join(fmt(f) for f in finals)} | {ci} | {vs} | "
                            f"{verdict} | {fmt(first)} -> {fmt(last)} | {wall:.0f} | {train:.0f} | "
                            f"{np.mean([r['frames'] / r['process_wall_s'] for r in runs]):.0f} | {fmt_ratio(ratio)} |")
        plot(task, by_arm, out / png_name(args.page, task))
        sections.append("")
    path = out / f"{args.page}.md"
    path.write_text("\n".join(lines + summary(verdicts) + sections) + "\n")
    records = [r for by_arm in results.values() for runs in by_arm.values() for r in runs]
    made = {(r["task"], r["arm"], r["seed"]) for r in records}
    data = out / f"{args.page}-runs.json"     # a call on fewer tasks, arms or seeds keeps the file's other runs
    records += [r for key, r in known_records(data).items() if key not in made]
    data.write_text(json.dumps(records, indent=1))
    return path


def png_name(page: str, task: str) -> str:
    """external.md keeps its TASK.png; another page's plots are PAGE-TASK.png beside it."""
    return f"{task}.png" if page == "external" else f"{page}-{task}.png"


def known_records(path: Path) -> dict[tuple[str, str, int], dict]:
    """The finished runs a report's data file (PAGE-runs.json) holds, by (task, arm, seed)."""
    if not path.exists():
        return {}
    return {(r["task"], r["arm"], r["seed"]): r for r in json.loads(path.read_text())
            if {"task", "arm", "seed"} <= r.keys()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=1_002_000, help="env frames per run (default 1,002,000)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--tasks", default=",".join(TASKS),
                   help=f"comma-separated: {', '.join(TASKS)} (the default), or any other VMAS task BenchMARL "
                        "ships a config for (wheel, dispersion, give_way, sampling, ...), run at its task "
                        "parameters on both sides")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, from {', '.join(ARMS)}")
    p.add_argument("--write", default=str(ROOT / "docs" / "evidence"), help="where the page and its PNGs go")
    p.add_argument("--page", default="external",
                   help="the report's name: WRITE/PAGE.md, its PNGs and its data file WRITE/PAGE-runs.json, whose "
                        "finished runs a later call reuses (default external)")
    p.add_argument("--runs", default=str(ROOT / "runs" / "vs_benchmarl"), help="run folders (reused when finished)")
    p.add_argument("--fresh", action="store_true", help="redo runs that already have a result")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: report the finished runs (e.g. of an interrupted comparison), list the rest")
    p.add_argument("--benchmarl-threads", type=int, default=0,
                   help="torch threads of BenchMARL's process (0: torch's default, one per core, as published; "
                        "1 is much faster on a machine other jobs load, see README.md)")
    p.add_argument("--hdppo-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a further `hdppo train` setting for every hdppo arm, e.g. epochs=16 (repeatable; for "
                        "diagnostics: the comparison itself runs hdppo's defaults; best with another --runs)")
    args = p.parse_args(argv)
    bad_set = [kv for kv in args.hdppo_set if "=" not in kv]
    if bad_set:
        sys.exit(f"--hdppo-set {bad_set[0]!r}: write KEY=VALUE, e.g. --hdppo-set epochs=16")
    tasks = [t for t in args.tasks.split(",") if t]
    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        sys.exit(f"unknown arm {bad}: arms {ARMS}")
    args.frames = -(-args.frames // FRAMES_PER_BATCH) * FRAMES_PER_BATCH
    args.seed_list = list(range(args.seeds))
    interval = max(FRAMES_PER_BATCH, args.frames // 10 // FRAMES_PER_BATCH * FRAMES_PER_BATCH)
    given = argv if argv is not None else sys.argv[1:]
    command = shlex.join(["python", "examples/benchmarks/vs_benchmarl.py", *[a for a in given if a != "--report-only"]])
    bm_python: Path | None = None
    if any(a.startswith("benchmarl") for a in arms):
        if not args.report_only:
            bm_python = ensure_benchmarl()
        elif benchmarl_python().exists():                        # --report-only reads BenchMARL's venv, never makes it
            bm_python = benchmarl_python()
    results: dict[str, dict[str, list[dict]]] = {}
    missing: list[str] = []
    known = {} if args.fresh else known_records(Path(args.write) / f"{args.page}-runs.json")
    plan = [(seed, task, arm) for seed in args.seed_list for task in tasks       # seed 0 of everything first,
            for arm in arms_for(task, arms, Path(args.runs))]                  # so a stopped sitting has pairs
    for seed, task, arm in plan:
        folder = Path(args.runs) / task / arm / f"seed_{seed}"
        done = folder / "result.json"
        extra = [] if arm.startswith("benchmarl") else args.hdppo_set
        asked = {"frames_asked": args.frames, "hdppo_set": extra}
        old = json.loads(done.read_text()) if done.exists() else known.get((task, arm, seed), {})
        same = old.get("frames_asked") == asked["frames_asked"] and old.get("hdppo_set", []) == extra
        changed = changed_since(task, arm, seed, args.frames, folder, extra, old) if same else []
        if changed:
            print(f"{folder} was made with settings its command no longer gives: {'; '.join(changed)}",
                  flush=True)
        if not args.fresh and same and not changed:
            print(f"reuse {folder}", flush=True)
        elif args.report_only:
            why = "made with other settings" if changed else "not trained"
            print(f"missing {folder} (--report-only: {why})", flush=True)
            missing.append(f"{task}/{arm}/seed_{seed}" + (f" ({why})" if changed else ""))
            continue
        else:
            shutil.rmtree(folder, ignore_errors=True)      # an unfinished or --fresh run starts over
            folder.mkdir(parents=True)
            print(f"run {task} {arm} seed {seed} ({args.frames:,} frames) -> {folder}", flush=True)
            if arm.startswith("benchmarl"):
                assert bm_python is not None                     # made above whenever a BenchMARL arm runs
                run_benchmarl(bm_python, task, arm, seed, args.frames, interval, folder, args.benchmarl_threads)
            else:
                run_hdppo(task, arm, seed, args.frames, folder, extra)
            old = json.loads(done.read_text())
            old.update(asked)             # a later call with another budget or setting redoes the run
            done.write_text(json.dumps(old, indent=1))
        r = old
        kept = folder / "run" / "config.json"
        if arm.startswith("hdppo") and "config" not in r and kept.exists():  # made before records kept it
            from hdppo.runfolder import load_run_config
            r["config"] = {k: v for k, v in load_run_config(folder / "run").items()
                           if k in ("train", "scenario_config", "layers")}
        print(f"  final return {fmt(r['final_return'])}, {r['process_wall_s']:.0f} s, "
              f"{r['frames'] / r['process_wall_s']:.0f} frames/s", flush=True)
        results.setdefault(task, {}).setdefault(arm, []).append(r)
    print(f"wrote {report(results, args, Path(args.write), command, bm_python, missing)}")


if __name__ == "__main__":
    main()
