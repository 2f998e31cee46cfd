"""Evidence runs: does a scenario's hierarchy learn faster than a flat team on the same units?

Trains every (variant, seed) pair with `hdppo train` at one env-step budget (each run a separate
process, its exact command recorded), evaluates each final team over fresh episodes, and writes a
markdown report with a PNG of the outcome curves (win rate, delivery rate, ...) and 95% bootstrap
confidence intervals. Runs already finished in the output folder are reused, so an interrupted
evidence job continues where it stopped. The per-scenario scripts live in examples/evidence/.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hdppo import provenance
from hdppo.engine.metrics import read_csv
from hdppo.stats import seeds_ci

try:
    import fcntl
except ImportError:           # pragma: no cover - not on POSIX: parallel streams may then lose an entry
    fcntl = None  # type: ignore[assignment]

# The schedules of hdppo's defaults until 2026-12-01 (the learning rate decayed to 0, an unclipped
# value loss): reports made under them pin these, so their commands still make their runs.
OLD_SCHEDULES = ["lr_decay=true", "clip_vloss=false"]


@dataclass
class Variant:
    """One team design: a label and the `hdppo train` arguments that make it (e.g. `layers=1`)."""

    label: str
    args: list[str]


@dataclass
class EvidencePlan:
    scenario: str
    outcome: str                                   # episode key averaged in metrics/run.csv and by eval
    steps: int                                     # env steps per run, equal for every variant
    seeds: list[int]
    variants: list[Variant]                        # the first one is the hierarchy, the last the flat baseline
    common: list[str] = field(default_factory=list)  # `hdppo train` arguments shared by every run
    eval_episodes: int = 100
    out: Path = Path("runs/evidence")
    also: list[str] = field(default_factory=list)   # further episode keys reported from the final eval

    def run_dir(self, variant: Variant, seed: int) -> Path:
        return self.out / f"{variant.label}-seed{seed}"

    def command(self, variant: Variant, seed: int) -> list[str]:
        return ["hdppo", "train", self.scenario, "--layer", "all", "--steps", str(self.steps), "--seed", str(seed),
                "--out", str(self.run_dir(variant, seed)), "--no-progress", *self.common, *variant.args]


def finished(run: Path, steps: int) -> bool:
    """A run folder whose state says it trained its whole budget."""
    state = run / "state.json"
    return state.is_file() and json.loads(state.read_text()).get("env_steps", 0) >= steps


def check_current(plan: EvidencePlan) -> None:
    """Refuse finished runs that their command, resolved by this code, would no longer make (e.g. a
    default changed since): a report on them would list commands that give other numbers."""
    refuse_stale([(plan.run_dir(variant, seed), plan.command(variant, seed), plan.steps)
                  for seed in plan.seeds for variant in plan.variants])


def refuse_stale(jobs: list[tuple[Path, list[str], int]]) -> None:
    """check_current for any (run folder, `hdppo train` command, env steps) jobs: SystemExit listing
    each finished run whose command would no longer make it."""
    from examples.studies.same_run import changed_settings
    stale = {}
    for run, cmd, steps in jobs:
        if finished(run, steps) and (changes := changed_settings(run, cmd[2:])):
            stale[run] = changes
    if stale:
        lines = "\n".join(f"  {run}: {'; '.join(changes)}" for run, changes in stale.items())
        raise SystemExit(f"these finished runs were made with settings their commands no longer give:\n{lines}\n"
                         "fix: remove those folders to train them again with this code, or put the runs' values in "
                         "the plan's arguments (e.g. `epochs=4` where a default changed) so the report says how "
                         "they were made")


def train_all(plan: EvidencePlan, log: Callable[[str], None] = print) -> None:
    """Train every missing (variant, seed) run, one process each, output in RUN.log beside the folder."""
    for seed in plan.seeds:
        for variant in plan.variants:
            train_run(plan.run_dir(variant, seed), plan.command(variant, seed), plan.steps,
                      plan.out / "timings.json", log)


def train_run(run: Path, cmd: list[str], steps: int, timings: Path, log: Callable[[str], None] = print) -> None:
    """Train one run with `cmd` (`hdppo train ...`) in its own process unless it finished its `steps`
    already; output in RUN.log beside the folder, its wall seconds added to `timings` (a JSON file of
    run folder name -> seconds)."""
    if finished(run, steps):
        log(f"reuse  {run} (finished)")
        return
    if run.exists():
        raise SystemExit(f"{run} holds an unfinished run; "
                         f"remove it or finish it with `hdppo train --resume {run}`")
    run.parent.mkdir(parents=True, exist_ok=True)
    log(f"train  {shlex.join(cmd)}")
    t0 = time.perf_counter()
    with open(run.with_suffix(".log"), "w") as out:
        proc = subprocess.run([sys.executable, "-m", "hdppo.cli", *cmd[1:]], stdout=out,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"`{shlex.join(cmd)}` failed (exit {proc.returncode}); see {run.with_suffix('.log')}")
    seconds = time.perf_counter() - t0
    record_seconds(timings, run.name, seconds)
    log(f"       done in {seconds:.0f} s")


def record_seconds(timings: Path, name: str, seconds: float) -> None:
    """Add NAME's training seconds to the JSON file `timings`. Runs trained side by side (one process
    per stream) share the file: the read-modify-write holds an exclusive `flock` on TIMINGS.lock and
    lands in one rename, so no entry is lost and a reader never sees half a file."""
    timings.parent.mkdir(parents=True, exist_ok=True)
    with open(timings.with_name(timings.name + ".lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        times = json.loads(timings.read_text()) if timings.is_file() else {}
        times[name] = seconds
        tmp = timings.with_name(f"{timings.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(times, indent=1))
        os.replace(tmp, timings)


MIN_EPISODES = 50   # curve points averaging fewer episodes are too noisy to compare


def outcome_curve(run: Path, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, outcome averaged over the last 200 episodes) from RUN/metrics/run.csv.

    Points whose window holds fewer than MIN_EPISODES episodes (the start of a run) are left out.
    """
    rows = [r for r in read_csv(run, "run")
            if key in r and np.isfinite(r[key]) and r.get("episodes", 0) >= MIN_EPISODES]
    return np.array([r["step"] for r in rows], float), np.array([r[key] for r in rows], float)


def seed_curve(run: Path, key: str, grid: np.ndarray) -> np.ndarray:
    """One seed's outcome curve interpolated onto `grid` (NaN before its first point, all NaN if none)."""
    x, y = outcome_curve(run, key)
    if not len(x):
        return np.full(len(grid), np.nan)
    c = np.interp(grid, x, y)
    c[grid < x[0]] = np.nan
    return c


def mean_curve(runs: list[Path], key: str, grid: np.ndarray) -> np.ndarray:
    """The seeds' outcome curves interpolated onto `grid` and averaged (NaN before a seed's first point)."""
    stack = np.stack([seed_curve(run, key, grid) for run in runs])
    seen = np.isfinite(stack).any(axis=0)
    out = np.full(len(grid), np.nan)
    out[seen] = np.nanmean(stack[:, seen], axis=0)
    return out


def first_value(curve: np.ndarray) -> float:
    """The curve's first finite value (NaN if it has none)."""
    finite = curve[np.isfinite(curve)]
    return float(finite[0]) if len(finite) else float("nan")


def final_value(curve: np.ndarray, points: int = 5) -> float:
    """Mean of the curve's last `points` finite values (NaN if it has none)."""
    finite = curve[np.isfinite(curve)]
    return float(finite[-points:].mean()) if len(finite) else float("nan")


def steps_to_reach(grid: np.ndarray, curve: np.ndarray, threshold: float) -> float | None:
    """The first grid step where the curve is at or above threshold, None if it never is."""
    hit = np.flatnonzero(np.nan_to_num(curve, nan=-np.inf) >= threshold)
    return float(grid[hit[0]]) if len(hit) else None


def seed_steps_to_target(runs: list[Path], key: str, grid: np.ndarray, target: float) -> dict[str, Any]:
    """Per seed, the first grid step where that seed's own curve reaches `target` (None if never);
    the mean over the seeds that reached it with a Student-t interval across them, and how many did."""
    per_seed = [steps_to_reach(grid, seed_curve(run, key, grid), target) for run in runs]
    reached = [s for s in per_seed if s is not None]
    ci = seeds_ci([[s] for s in reached]) if len(reached) >= 2 else (float("nan"),) * 3
    return {"per_seed": per_seed, "reached": len(reached), "ci": ci}


def final_episodes(run: Path, episodes: int, seed: int, goal_counts: dict[str, Any] | None = None,
                   uniform: tuple[str, ...] = (), keys: tuple[str, ...] = (),
                   overrides: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The final team's eval episodes, cached in RUN/evidence_eval.json (keyed by count, seed and the
    checkpoints' versions) so a report can be rewritten without playing again. A `goal_counts` dict
    is filled with the goals finished and achieved per layer (`hdppo.runtime.evaluate.play`); with
    `uniform` layers those act uniformly at random (`hdppo eval --uniform`), cached in their own file;
    with scenario `overrides` (`hdppo eval RUN key=value`: another map) the team plays there, cached in
    a file of its own too. A cache in which no record has one of the episode `keys` the caller reads
    (a metric newer than the cache) is played again."""
    from hdppo.runtime.evaluate import play
    name = "evidence_eval" + (f"-uniform-{'-'.join(uniform)}" if uniform else "") + ("-moved" if overrides else "")
    cache = run / f"{name}.json"
    state = json.loads((run / "state.json").read_text())
    key = {"episodes": episodes, "seed": seed, "env_steps": state.get("env_steps")}
    if overrides:
        key["overrides"] = dict(sorted(overrides.items()))
    if cache.is_file():
        saved = json.loads(cache.read_text())
        has_keys = all(any(k in e for e in saved.get("records", [])) for k in keys)    # some episodes may lack one
        if saved.get("key") == key and (goal_counts is None or "goals" in saved) and has_keys:
            if goal_counts is not None:
                goal_counts.update(saved["goals"])
            return saved["records"]
    asked: dict[str, Any] = {} if goal_counts is None else {"goal_counts": {}}
    if uniform:
        asked["uniform"] = uniform
    if overrides:
        asked["overrides"] = overrides
    records = play(run, episodes, seed=seed, **asked)
    saved = {"key": key, "records": records}
    if goal_counts is not None:
        goal_counts.update(asked["goal_counts"])
        saved["goals"] = asked["goal_counts"]
    cache.write_text(json.dumps(saved))
    return records


def summarize(plan: EvidencePlan, eval_seed: int = 12345) -> dict[str, Any]:
    """Final evaluation per run, CIs across seeds per variant, and steps for the hierarchy to reach flat's final."""
    grid = np.linspace(0, plan.steps, 101)
    out: dict[str, Any] = {"variants": {}, "grid": grid.tolist()}
    for variant in plan.variants:
        runs = [plan.run_dir(variant, s) for s in plan.seeds]
        per_seed, outcome, team = [], [], []
        extra: dict[str, list[list[float]]] = {k: [] for k in plan.also}
        for seed, run in zip(plan.seeds, runs):
            eps = final_episodes(run, plan.eval_episodes, eval_seed + seed)
            vals = [float(e.get(plan.outcome, np.nan)) for e in eps]
            per_seed.append(float(np.mean(vals)))
            outcome.append(vals)
            team.append([float(e["team_return"]) for e in eps])
            for k in plan.also:
                extra[k].append([float(e.get(k, np.nan)) for e in eps])
        curve = mean_curve(runs, plan.outcome, grid)
        out["variants"][variant.label] = {      # intervals across the seeds (the replicates), not pooled episodes
            "minutes": variant_minutes(plan, runs), "eval_per_seed": per_seed, "eval": seeds_ci(outcome),
            "team_return": seeds_ci(team),
            "also": {k: seeds_ci(v) for k, v in extra.items()},
            "curve": curve.tolist(), "curve_final": final_value(curve),
            "commands": [shlex.join(plan.command(variant, s)) for s in plan.seeds]}
    hier, flat = plan.variants[0].label, plan.variants[-1].label
    target = out["variants"][flat]["curve_final"]
    start = min(first_value(np.asarray(out["variants"][v]["curve"])) for v in (hier, flat))
    # a flat team that never rose above where both started sets no target worth reaching
    out["flat_improved"] = bool(np.isfinite(target) and target > start)
    reach = steps_to_reach(grid, np.asarray(out["variants"][hier]["curve"]), target) if out["flat_improved"] else None
    out["target"] = target
    for variant in plan.variants:
        runs = [plan.run_dir(variant, s) for s in plan.seeds]
        out["variants"][variant.label]["steps_to_target"] = (
            seed_steps_to_target(runs, plan.outcome, grid, target) if out["flat_improved"] else None)
    out["hier_steps_to_target"] = reach
    out["hier_fraction_of_budget"] = None if reach is None else reach / plan.steps
    return out


def plot_evidence(plan: EvidencePlan, summary: dict[str, Any], png: Path) -> Path:
    """The outcome (and each `also` key) vs env steps, one panel each: seeds thin, their mean bold,
    one colour per variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = [plan.outcome, *plan.also]
    cols = min(len(keys), 2)
    rows = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    grid = np.asarray(summary["grid"])
    for ax, key in zip(axes.flat, keys):
        for i, variant in enumerate(plan.variants):
            colour = f"C{i}"
            runs = [plan.run_dir(variant, seed) for seed in plan.seeds]
            for run in runs:
                x, y = outcome_curve(run, key)
                ax.plot(x, y, color=colour, alpha=0.3, linewidth=0.8)
            mean = summary["variants"][variant.label]["curve"] if key == plan.outcome else mean_curve(runs, key, grid)
            ax.plot(grid, mean, color=colour, linewidth=2, label=f"{variant.label} (mean of {len(plan.seeds)} seeds)")
        if key == plan.outcome:
            ax.axhline(summary["target"], color="grey", linestyle="--", linewidth=0.8,
                       label=f"{plan.variants[-1].label} final")
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"{key} (last 200 episodes)")
        ax.set_title(f"{plan.scenario}: {key} while training")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_png(fig, png)


def save_png(fig: Any, png: Path) -> Path:
    """A report's figure, laid out, saved at PNG (its folder made) and closed; PNG."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def _ci(ci: tuple[float, float, float]) -> str:
    return f"{ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}]"


def read_timings(plan: EvidencePlan) -> dict[str, float]:
    """Training seconds per run folder name, from OUT/timings.json (empty when no run was timed here)."""
    timings = plan.out / "timings.json"
    return json.loads(timings.read_text()) if timings.is_file() else {}


def variant_minutes(plan: EvidencePlan, runs: list[Path]) -> float | None:
    """Median wall minutes of one training run of these runs (timings.json; None when none was timed here).
    The median, since one run slowed by another job on a shared machine would move a mean."""
    times = read_timings(plan)
    mine = [times[run.name] for run in runs if run.name in times]
    return float(np.median(mine)) / 60.0 if mine else None


def _minutes(m: float | None) -> str:
    return "-" if m is None else f"{m:.1f}"


def run_minutes(plan: EvidencePlan) -> float:
    """Mean wall minutes of one training run, from the evidence folder's timings.json."""
    times = read_timings(plan)
    return float(np.mean(list(times.values()))) / 60.0 if times else float("nan")


def markdown(plan: EvidencePlan, summary: dict[str, Any], png_name: str, command: str,
             made: dict[str, Any] | None = None) -> str:
    """The report: command, settings, final outcome table with CIs, curves, steps-to-target."""
    hier, flat = plan.variants[0].label, plan.variants[-1].label
    lines = [f"# Evidence: {plan.scenario}, {hier} vs {flat}", "",
             f"Reproduce with `{command}`: {len(plan.seeds) * len(plan.variants)} runs of about "
             f"{run_minutes(plan):.1f} minutes each on this project's 2-core machine.",
             "",
             f"Each run trains `--layer all` for **{plan.steps:,} env steps**"
             + (f" with `{' '.join(plan.common)}`" if plan.common else "")
             + f"; seeds {plan.seeds}; every final team "
             f"is played for {plan.eval_episodes} fresh episodes (`hdppo.runtime.evaluate.play`, sampled actions). "
             f"Confidence intervals are 95% Student-t intervals across the seeds' means (one seed: exact binomial or "
             f"bootstrap over its episodes).", "",
             f"| team | final {plan.outcome} (eval, 95% CI) | per seed | team return (eval) | "
             + "".join(f"{k} (eval) | " for k in plan.also) + f"{plan.outcome} at the end of training | "
             "training min per run (median) |",
             "|---|---|---|---|" + "---|" * len(plan.also) + "---:|---:|"]
    for v in plan.variants:
        s = summary["variants"][v.label]
        per = ", ".join(f"{x:.2f}" for x in s["eval_per_seed"])
        lines.append(f"| {v.label} (`{' '.join(v.args) or 'defaults'}`) | {_ci(s['eval'])} | {per} | "
                     f"{_ci(s['team_return'])} | " + "".join(f"{_ci(s['also'][k])} | " for k in plan.also)
                     + f"{s['curve_final']:.3f} | {_minutes(s['minutes'])} |")
    reach = summary["hier_steps_to_target"]
    lines += ["", f"![{plan.outcome} curves]({png_name})", ""]
    if not summary["flat_improved"]:
        lines.append(f"The {flat} team's {plan.outcome} did not rise above where both teams started "
                     f"({summary['target']:.3f} at the end), so there is no target for the {hier} team to reach "
                     f"sooner; compare the other columns.")
    elif reach is None:
        lines.append(f"The {hier} team's seed-mean curve never reached the {flat} team's final {plan.outcome} "
                     f"({summary['target']:.3f}) within the budget.")
    else:
        frac = summary["hier_fraction_of_budget"]
        verdict = "within" if frac <= 0.5 else "more than"
        lines.append(f"The {hier} team's seed-mean curve first reaches the {flat} team's final {plan.outcome} "
                     f"({summary['target']:.3f}) at {reach:,.0f} env steps, {frac:.2f} of the budget "
                     f"({verdict} half the env steps).")
    if summary["flat_improved"] and all(summary["variants"][v.label].get("steps_to_target") for v in plan.variants):
        lines += ["", f"Env steps until each seed's own {plan.outcome} curve first reaches the {flat} team's final "
                      f"{plan.outcome} ({summary['target']:.3f}); mean and 95% Student-t interval across the seeds "
                      f"that reached it:", "",
                  "| team | seeds that reached it | steps (mean, 95% CI) | per seed |", "|---|---|---|---|"]
        for v in plan.variants:
            st = summary["variants"][v.label]["steps_to_target"]
            per = ", ".join("-" if s is None else f"{s / 1000:.0f}k" for s in st["per_seed"])
            m, lo, hi = st["ci"]
            cell = f"{m / 1000:.0f}k [{lo / 1000:.0f}k, {hi / 1000:.0f}k]" if np.isfinite(m) else "-"
            lines.append(f"| {v.label} | {st['reached']} of {len(st['per_seed'])} | {cell} | {per} |")
    lines += ["", "Runs (exact commands):", ""]
    for v in plan.variants:
        lines += [f"- `{c}`" for c in summary["variants"][v.label]["commands"]]
    lines += ["", "Made by (each run's `provenance.json`, and the code that wrote this report):", ""]
    runs = sorted({provenance.describe(provenance.read(plan.run_dir(v, s))) for v in plan.variants
                   for s in plan.seeds})
    lines += [f"- runs: {m}" for m in runs]
    lines.append(f"- report: {provenance.describe(made or provenance.provenance())}")
    return "\n".join(lines) + "\n"


def main(plan: EvidencePlan, script: str, argv: list[str] | None = None) -> dict[str, Any]:
    """CLI of the evidence script at path `script`: --steps, --seeds, --out, --episodes, --write DIR,
    --tag, --report-only. The report's reproduce command is `python SCRIPT` with these arguments."""
    plan = dataclasses.replace(plan, variants=list(plan.variants))   # the caller's plan stays as it was
    given = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", script, *[a for a in given if a != "--report-only"]])
    p = argparse.ArgumentParser(description=f"{plan.scenario}: {plan.variants[0].label} vs {plan.variants[-1].label}")
    p.add_argument("--steps", type=int, default=plan.steps, help="env steps per run")
    p.add_argument("--seeds", type=int, nargs="+", default=plan.seeds)
    p.add_argument("--out", default=str(plan.out), help="folder of the runs (finished runs are reused)")
    p.add_argument("--episodes", type=int, default=plan.eval_episodes, help="eval episodes per run")
    p.add_argument("--write", metavar="DIR", help="write DIR/SCENARIO.md and DIR/SCENARIO.png")
    p.add_argument("--tag", default="", help="name the report SCENARIO-TAG.md/.png (e.g. a shorter budget)")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                   help="a further team design to train beside the others, e.g. 'no-shaping=layers=3 w_int.low=0' "
                        "(repeatable; listed between the hierarchy and the flat baseline)")
    p.add_argument("--report-only", action="store_true", help="skip training; report the runs in --out")
    args = p.parse_args(given)
    plan.steps, plan.seeds, plan.out, plan.eval_episodes = args.steps, args.seeds, Path(args.out), args.episodes
    for spec in args.variant:
        label, sep, rest = spec.partition("=")
        if not sep or not label or "/" in label:
            p.error(f"--variant {spec!r}: write LABEL=ARGS, e.g. 'no-shaping=layers=3 w_int.low=0'")
        plan.variants.insert(len(plan.variants) - 1, Variant(label, shlex.split(rest)))
    return report(plan, args, command, plan.scenario, check=lambda: check_current(plan), train=train_all,
                  summarize=summarize, plot=plot_evidence, markdown=markdown)


def report(plan: Any, args: argparse.Namespace, command: str, base: str, *, check: Callable[[], None],
           train: Callable, summarize: Callable, plot: Callable, markdown: Callable,
           log: Callable[[str], None] = print) -> dict[str, Any]:
    """A report script's steps, the plan's own functions passed in: check that the finished runs are
    still what their commands make, train what is missing (unless --report-only), summarize, write
    NAME.md, NAME.png (NAME = base, or base-TAG) and OUT/summary.json."""
    made = provenance.provenance()          # before this report writes its own files into the checkout
    check()
    if not args.report_only:
        train(plan, log)
    try:
        summary = summarize(plan)
    except FileNotFoundError as exc:
        if not args.report_only:
            raise
        raise SystemExit(f"--report-only: {exc.filename} is missing, so a run of this report is not trained; "
                         "fix: run the same command without --report-only (finished runs are reused)") from None
    write = Path(args.write) if args.write else plan.out
    name = f"{base}-{args.tag}" if args.tag else base
    png = plot(plan, summary, write / f"{name}.png")
    text = markdown(plan, summary, png.name, command, made)
    (write / f"{name}.md").write_text(text)
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=1))
    log(text)
    return summary
