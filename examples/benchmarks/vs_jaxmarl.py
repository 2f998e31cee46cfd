"""hdppo side by side with JaxMARL's own IPPO and MAPPO on SMAX maps, same machine, same env frames.

    python examples/benchmarks/vs_jaxmarl.py --jaxmarl-repo ~/JaxMARL          # 3m and 2s3z, 2M frames, 3 seeds
    python examples/benchmarks/vs_jaxmarl.py --jaxmarl-repo ~/JaxMARL --maps 3m --frames 65536 --seeds 1 \
        --write /tmp/smoke

Run it with hdppo's venv active (`pip install -e ".[smax]"`). JaxMARL's baselines are not in its pip
package: clone the repository (`git clone https://github.com/FLAIROx/JaxMARL`) and pass the clone as
`--jaxmarl-repo`; its commit is recorded with every run. They run unmodified in their own venv,
`.venv-jaxmarl/` at the repository root, made on first use (`jaxmarl[algs]==0.2.0`: JAX, flax,
optax, distrax, hydra; never installed into hdppo's venv), through `_jaxmarl_run.py`.

Arms: `jaxmarl_ippo` and `jaxmarl_mappo` (`baselines/IPPO/ippo_rnn_smax.py` and
`baselines/MAPPO/mappo_rnn_smax.py` at their published configs, only the map, seed and frame budget
set: GRU actors, 128 copies x 128 steps per update, 4 epochs x 4 minibatches), `hdppo_flat`
(`hdppo train smax_MAP` at hdppo's defaults) and `hdppo_hier` (`hier=true`: a commander assigns
each squad an enemy, squads each unit, all layers trained together; docs/scenarios/smax.md).
Both sides play JaxMARL's `HeuristicEnemySMAX` with the same parameters (enemy actions visible,
walls kill, the enemy attacks the closest unit, 100 steps).

A frame is one env step of one copy (all allies act), on both sides; the budget is rounded up to a
whole number of JaxMARL updates (16,384 frames) and hdppo runs whole collection rounds (its count is
recorded). Win rate: 100 fresh episodes of the final team after training, actions sampled from the
policy as trained (the primary figure, as JaxMARL reports its training win rates) and greedy (the
most likely action), counted the same way on both sides: every enemy dead and an ally alive when
the episode ends. Intervals are Student-t across seeds; "vs MAPPO" is the difference of the seed
means with a Welch interval. Curves are training win rates against frames (JaxMARL's logged
`win_rate` per update, hdppo's run.csv `win`). Wall-clock is the whole training process on both
sides (start-up and JAX's compilation included, evaluation excluded); the machine's load average
is recorded with each run.

Finished runs (RUNS/MAP/ARM/seed_S/result.json) are reused, and so are the records of the report's
data file (`smax-runs.json` beside the report) while their settings are what this code makes;
`--fresh` redoes them; `--report-only` trains nothing and reports what is finished.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.*
from examples.benchmarks.vs_benchmarl import as_module, commit, sh

ROOT = Path(__file__).resolve().parents[2]
JAXMARL_VENV = ROOT / ".venv-jaxmarl"
JAXMARL_PACKAGES = ["jaxmarl[algs]==0.2.0"]
UPDATE_FRAMES = 128 * 128          # JaxMARL's NUM_ENVS x NUM_STEPS in both SMAX configs
MAPS = ["3m", "2s3z", "5m_vs_6m", "3s5z", "smacv2_10_units"]
ARMS = ["jaxmarl_ippo", "jaxmarl_mappo", "hdppo_flat", "hdppo_hier"]
HDPPO_ARGS = {"hdppo_flat": [], "hdppo_hier": ["--layer", "all", "hier=true"]}
DATA_FILE = "smax-runs.json"
SETTINGS = ("train", "scenario_config", "layers")      # what a record keeps of an hdppo run's config.json
KEEP_MARK = "<!-- Written by hand, not by vs_jaxmarl.py: keep this section when the page is regenerated. -->"
KEEP_END = "<!-- End of the hand-written section. -->"


def jaxmarl_python() -> Path:
    return JAXMARL_VENV / "bin" / "python"


def ensure_jaxmarl() -> Path:
    """JaxMARL's venv, made once: its baselines' packages, pinned."""
    python = jaxmarl_python()
    if not python.exists():
        print(f"making JaxMARL's venv {JAXMARL_VENV} ({', '.join(JAXMARL_PACKAGES)})", flush=True)
        sh([sys.executable, "-m", "venv", str(JAXMARL_VENV)])
        sh([str(python), "-m", "pip", "install", "-q", *JAXMARL_PACKAGES])
    return python


def repo_commit(repo: Path) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def check_repo(repo: str | None) -> Path:
    if not repo:
        sys.exit("the JaxMARL arms need a clone of the JaxMARL repository (its baselines/ are not in the pip "
                 "package): git clone https://github.com/FLAIROx/JaxMARL ~/JaxMARL, then --jaxmarl-repo ~/JaxMARL "
                 "(or leave the JaxMARL arms out: --arms hdppo_flat,hdppo_hier)")
    path = Path(repo).expanduser()
    if not (path / "baselines" / "IPPO" / "ippo_rnn_smax.py").exists():
        sys.exit(f"--jaxmarl-repo {repo}: no baselines/IPPO/ippo_rnn_smax.py there; pass a clone of "
                 "https://github.com/FLAIROx/JaxMARL")
    return path


def hdppo_command(map_name: str, arm: str, seed: int, frames: int, folder: Path) -> list[str]:
    return ["hdppo", "train", f"smax_{map_name}", "--steps", str(frames), "--seed", str(seed), "--no-progress",
            "--out", str(folder / "run"), *HDPPO_ARGS[arm]]


def eval_win(run: Path, episodes: int, seed: int, greedy: bool) -> float:
    cmd = ["hdppo", "eval", str(run), "--episodes", str(episodes), "--json", "--seed", str(seed)]
    cmd += ["--deterministic"] if greedy else []
    out = subprocess.run(as_module(cmd), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {shlex.join(cmd)}\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout[out.stdout.index("{"):])["win"][0])      # [mean, lo, hi]


def run_hdppo(map_name: str, arm: str, seed: int, frames: int, folder: Path, episodes: int) -> dict:
    from hdppo.runfolder import load_run_config
    cmd = hdppo_command(map_name, arm, seed, frames, folder)
    load = os.getloadavg()[0]
    wall = sh(as_module(cmd), folder / "log.txt")
    run = folder / "run"
    with open(run / "metrics" / "run.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    curve = [(int(float(r["env_steps"])), float(r["win"]), float(r["team_return"])) for r in rows
             if r.get("win") not in (None, "", "nan")]
    return {"framework": "hdppo", "arm": arm, "map": map_name, "seed": seed,
            "frames": int(float(rows[-1]["env_steps"])) if rows else frames, "process_wall_s": wall,
            "win_sampled": eval_win(run, episodes, 1000 + seed, greedy=False),
            "win_greedy": eval_win(run, episodes, 1000 + seed, greedy=True), "eval_episodes": episodes,
            "curve": curve, "command": shlex.join(cmd),
            "config": {k: v for k, v in load_run_config(run).items() if k in SETTINGS},
            "load_before": load, "load_after": os.getloadavg()[0]}


def run_jaxmarl(python: Path, repo: Path, map_name: str, arm: str, seed: int, frames: int, folder: Path,
                episodes: int) -> dict:
    cmd = [str(python), str(Path(__file__).with_name("_jaxmarl_run.py")), "--repo", str(repo), "--algo",
           arm.split("_")[1], "--map", map_name, "--frames", str(frames), "--seed", str(seed),
           "--eval-episodes", str(episodes), "--out", str(folder)]
    load = os.getloadavg()[0]
    wall = sh(cmd, folder / "log.txt")
    result = json.loads((folder / "result.json").read_text())
    result.update(process_wall_s=wall - result["eval_s"], command=shlex.join(cmd), jaxmarl_commit=repo_commit(repo),
                  load_before=load, load_after=os.getloadavg()[0])
    return result


def changed(record: dict) -> list[str]:
    """Where a finished hdppo run's settings differ from what its command makes with this code."""
    if record["framework"] != "hdppo":
        return []
    from examples.studies.same_run import changed_from
    return changed_from(record["config"], shlex.split(record["command"])[2:])


def win_curve(records: list[dict], grid: np.ndarray) -> np.ndarray:
    """Each seed's training win rate interpolated on `grid` (NaN outside what it logged), seeds as rows."""
    rows = []
    for r in records:
        x, y = (np.array([c[0] for c in r["curve"]], float), np.array([c[1] for c in r["curve"]], float))
        rows.append(np.interp(grid, x, y, left=np.nan, right=np.nan) if x.size else np.full(grid.shape, np.nan))
    return np.array(rows)


def plot(map_name: str, by_arm: dict[str, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    top = max(r["frames"] for runs in by_arm.values() for r in runs)
    grid = np.linspace(0, top, 60)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (arm, runs) in enumerate(by_arm.items()):
        curves = win_curve(runs, grid)
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean, lo, hi = np.nanmean(curves, 0), np.nanmin(curves, 0), np.nanmax(curves, 0)
        ax.plot(grid, mean, color=f"C{i}", ls="-" if arm.startswith("hdppo") else "--", label=f"{arm} ({len(runs)})")
        ax.fill_between(grid, lo, hi, color=f"C{i}", alpha=0.15)
    ax.set_xlabel("frames (env steps of one copy)")
    ax.set_ylabel("training win rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"SMAX {map_name}: mean over seeds, band min-max")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ci_text(values: list[float]) -> str:
    """The mean with its Student-t interval across seeds; one seed has no interval, only its value."""
    from hdppo.stats import t_ci
    m, lo, hi = t_ci(values)
    return "-" if not np.isfinite(m) else f"{m:.2f}" if len(values) < 2 else f"{m:.2f} [{lo:.2f}, {hi:.2f}]"


def figure_name(map_name: str) -> str:
    """The file of a map's learning curves beside smax.md; not smax-MAP.png, which is the name of the
    evidence protocol's figure of that map (examples/evidence/smax.py writes it into the same folder)."""
    return f"smax-jaxmarl-{map_name}.png"


def map_table(map_name: str, by_arm: dict[str, list[dict]]) -> list[str]:
    from hdppo.stats import diff_ci
    mappo = by_arm.get("jaxmarl_mappo", [])
    mappo_wall = np.mean([r["process_wall_s"] for r in mappo]) if mappo else None
    lines = [f"## {map_name}", "", f"![{map_name}]({figure_name(map_name)})", "",
             "| arm | seeds | frames | win, sampled [95% CI] | win, greedy | vs MAPPO (sampled) | wall-clock s | "
             "frames/s | wall vs MAPPO | load |", "|---|---:|---:|---|---|---|---:|---:|---:|---:|"]
    for arm, runs in by_arm.items():
        wins = [r["win_sampled"] for r in runs]
        vs = diff_ci(wins, [r["win_sampled"] for r in mappo]) if mappo and arm != "jaxmarl_mappo" else None
        wall = float(np.mean([r["process_wall_s"] for r in runs]))
        fps = float(np.mean([r["frames"] / r["process_wall_s"] for r in runs]))
        load = float(np.mean([(r["load_before"] + r["load_after"]) / 2 for r in runs]))
        lines.append(f"| {arm} | {len(runs)} | {int(np.mean([r['frames'] for r in runs])):,} | {ci_text(wins)} | "
                     f"{ci_text([r['win_greedy'] for r in runs])} | "
                     f"{'-' if vs is None or not np.isfinite(vs[0]) else f'{vs[0]:+.2f} [{vs[1]:+.2f}, {vs[2]:+.2f}]'}"
                     f" | {wall:,.0f} | {fps:,.0f} | {'-' if mappo_wall is None else f'{mappo_wall / wall:.2f}x'} | "
                     f"{load:.1f} |")
    seeds = "; ".join(f"{arm}: " + ", ".join(f"{r['win_sampled']:.2f}" for r in runs) for arm, runs in by_arm.items())
    return lines + ["", f"Per seed (sampled): {seeds}.", ""]


def report(results: dict[str, dict[str, list[dict]]], args: argparse.Namespace, out: Path, command: str,
           missing: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    page = out / "smax.md"
    kept = ""
    if page.exists() and KEEP_MARK in page.read_text() and KEEP_END in page.read_text():
        kept = page.read_text().split(KEEP_MARK, 1)[1].split(KEEP_END, 1)[0]
    records = [r for by_arm in results.values() for runs in by_arm.values() for r in runs]
    jx = next((r for r in records if r["framework"] == "jaxmarl"), None)
    lines = ["# hdppo vs JaxMARL's IPPO and MAPPO on SMAX", ""]
    if missing:
        runs = "1 run of this command is" if len(missing) == 1 else f"{len(missing)} runs of this command are"
        lines += [f"> **Incomplete**: {runs} not finished: {', '.join(missing)}.", ""]
    lines += [f"Budget: {args.frames:,} frames asked per run (each row says what ran), seeds "
              f"{args.seed_list}, machine: {platform.machine()}, {os.cpu_count()} cores; the `load` column is "
              "the load average while each run trained (1 core busy = 1.0): wall-clock ratios compare runs "
              "made under similar load only.", "", "Command:", "", "```bash", command, "```", "",
              f"Commit: `{commit()}`. JaxMARL: repository commit `{jx['jaxmarl_commit'][:10] if jx else '-'}`, "
              f"venv `{json.dumps(jx['versions']) if jx else '-'}`.", "",
              "How to read it: the module docstring of `examples/benchmarks/vs_jaxmarl.py` says what each arm "
              "runs, what a frame is and how wins are counted (the same on both sides).", ""]
    if kept:
        lines += [KEEP_MARK + kept.rstrip(), "", KEEP_END, ""]
    for map_name, by_arm in results.items():
        plot(map_name, by_arm, out / figure_name(map_name))
        lines += map_table(map_name, by_arm)
    page.write_text("\n".join(lines))
    made = {(r["map"], r["arm"], r["seed"]) for r in records}    # a call on fewer maps, arms or seeds keeps the rest
    records += [r for key, r in known_records(out / DATA_FILE).items() if key not in made]
    (out / DATA_FILE).write_text(json.dumps(records, indent=1))
    return page


def known_records(path: Path) -> dict[tuple[str, str, int], dict]:
    if not path.exists():
        return {}
    return {(r["map"], r["arm"], r["seed"]): r for r in json.loads(path.read_text())}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jaxmarl-repo", help="a clone of https://github.com/FLAIROx/JaxMARL (for the JaxMARL arms)")
    p.add_argument("--maps", default="3m,2s3z", help=f"comma-separated, from {', '.join(MAPS)} (default 3m,2s3z)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, from {', '.join(ARMS)}")
    p.add_argument("--frames", type=int, default=2_000_000, help="env frames per run (default 2,000,000)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--write", default=str(ROOT / "docs" / "evidence"), help="where smax.md, its PNGs and data go")
    p.add_argument("--runs", default=str(ROOT / "runs" / "vs_jaxmarl"), help="run folders (reused when finished)")
    p.add_argument("--fresh", action="store_true", help="redo runs that already have a result")
    p.add_argument("--report-only", action="store_true", help="train nothing: report the finished runs")
    args = p.parse_args(argv)
    maps, arms = [m for m in args.maps.split(",") if m], [a for a in args.arms.split(",") if a]
    bad = [m for m in maps if m not in MAPS] + [a for a in arms if a not in ARMS]
    if bad:
        sys.exit(f"unknown map or arm {bad}: maps {MAPS}, arms {ARMS}")
    args.frames = -(-args.frames // UPDATE_FRAMES) * UPDATE_FRAMES
    args.seed_list = list(range(args.seeds))
    given = argv if argv is not None else sys.argv[1:]
    shown = [a for a in given if a != "--report-only"]
    command = shlex.join(["python", "examples/benchmarks/vs_jaxmarl.py", *shown])
    need_jaxmarl = any(a.startswith("jaxmarl") for a in arms) and not args.report_only
    repo = check_repo(args.jaxmarl_repo) if need_jaxmarl else None
    python = ensure_jaxmarl() if need_jaxmarl else None
    known = {} if args.fresh else known_records(Path(args.write) / DATA_FILE)
    results: dict[str, dict[str, list[dict]]] = {}
    missing: list[str] = []
    for seed, map_name, arm in itertools.product(args.seed_list, maps, arms):   # seed 0 of everything first
        folder = Path(args.runs) / map_name / arm / f"seed_{seed}"
        done = folder / "result.json"
        record = json.loads(done.read_text()) if done.exists() and not args.fresh else \
            known.get((map_name, arm, seed))
        fits = record is not None and record.get("frames_asked") == args.frames and \
            record.get("eval_episodes") == args.eval_episodes
        differs = changed(record) if fits and record is not None else []
        if differs:
            print(f"{map_name} {arm} seed {seed} was made with settings its command no longer gives: "
                  f"{'; '.join(differs)}", flush=True)
        if fits and not differs:
            print(f"reuse {map_name} {arm} seed {seed}", flush=True)
        elif args.report_only:
            missing.append(f"{map_name}/{arm}/seed_{seed}")
            continue
        else:
            import shutil
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            print(f"run {map_name} {arm} seed {seed} ({args.frames:,} frames) -> {folder}", flush=True)
            start = time.time()
            if arm.startswith("jaxmarl"):
                assert python is not None and repo is not None       # made above whenever a JaxMARL arm runs
                record = run_jaxmarl(python, repo, map_name, arm, seed, args.frames, folder, args.eval_episodes)
            else:
                record = run_hdppo(map_name, arm, seed, args.frames, folder, args.eval_episodes)
            record.update(frames_asked=args.frames, finished_at=time.strftime("%Y-%m-%d %H:%M"),
                          seconds_with_eval=time.time() - start)
            done.write_text(json.dumps(record, indent=1))
        assert record is not None
        print(f"  win {record['win_sampled']:.2f} sampled, {record['win_greedy']:.2f} greedy, "
              f"{record['process_wall_s']:.0f} s, {record['frames'] / record['process_wall_s']:,.0f} frames/s",
              flush=True)
        results.setdefault(map_name, {}).setdefault(arm, []).append(record)
    print(f"wrote {report(results, args, Path(args.write), command, missing)}")


if __name__ == "__main__":
    main()
