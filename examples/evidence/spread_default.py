"""Evidence for one default on MPE simple_spread: the flat team (3 agents, 25 cycles) at 300k env
steps, 2 process workers, seeds 0-2, under the default config and under each change tried while
looking for a default that learns this task as well as the VMAS tasks and skirmish.

    python examples/evidence/spread_default.py --write docs/evidence

Every run is `hdppo train spread n_agents=3 squad_size=3 max_cycles=25 layers=1 SETTINGS --steps
300000 --workers 2 --seed S` (the command a new user runs, plus the group's settings). A run's gain
is its training team return (run.csv) averaged over the last 10% of its steps, minus the first
logged value (the untrained team): the rows are written every `log_every` seconds, so a fixed
number of last rows would cover more of a faster run. Groups made before the default changed pin
the old values (`lr_decay=true clip_vloss=false`), so their commands still make their runs.
Finished runs under --out are reused (refused when their command would now make another run);
`--groups` picks some, `--held-out` the seeds run after the choice (default and previous only),
`--report-only` trains nothing.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from hdppo.engine.metrics import read_csv
from hdppo.stats import seeds_ci

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies.evidence import OLD_SCHEDULES, finished
from examples.studies.same_run import changed_settings

TASK = ["n_agents=3", "squad_size=3", "max_cycles=25", "layers=1"]
STEPS = 300_000
TARGET = 15.0                   # the gain every seed must reach
OLD = OLD_SCHEDULES            # the schedules of the defaults before 2026-12-01
# label -> (settings, what it is)
GROUPS: dict[str, tuple[list[str], str]] = {
    "default": ([], "the default: 16 epochs, constant lr, clipped value loss"),
    "previous": (OLD, "the previous default: 16 epochs, lr decayed to 0, unclipped value loss"),
    "epochs4": (["epochs=4", *OLD], "the default before that: 4 epochs"),
    "kl005": (["target_kl=0.005", *OLD], "previous + target_kl 0.005"),
    "kl002": (["target_kl=0.002", *OLD], "previous + target_kl 0.002"),
    "entconst": (["ent_coef_final=0.01", *OLD], "previous + constant entropy coefficient 0.01"),
    "ent3x": (["ent_coef=0.03", "ent_coef_final=0.003", *OLD], "previous + 3x the entropy coefficient"),
    "vclip": (["clip_vloss=true", "lr_decay=true", "target_kl=0.02"],
              "previous + clipped value loss (target_kl 0.02 as it ran; it stopped no epoch)"),
    "mb1": (["minibatches=1", *OLD], "previous + one minibatch"),
    "nodecay": (["lr_decay=false", "clip_vloss=false"], "previous + constant lr"),
    "ndent": (["ent_coef_final=0.01", "clip_vloss=false"], "previous + constant lr and entropy coefficient"),
}


def command(group: str, seed: int, out: Path) -> list[str]:
    return ["hdppo", "train", "spread", *TASK, *GROUPS[group][0], "--steps", str(STEPS), "--workers", "2",
            "--seed", str(seed), "--out", str(out), "--no-progress"]


def gain(run: Path) -> tuple[float, float, float]:
    """(first logged team return, mean over the last 10% of steps, their difference)."""
    rows = [r for r in read_csv(run, "run") if np.isfinite(r.get("team_return", np.nan))]
    steps = np.array([r["step"] for r in rows])
    y = np.array([r["team_return"] for r in rows])
    last = float(y[steps >= 0.9 * steps[-1]].mean())
    return float(y[0]), last, last - float(y[0])


def epochs_per_update(run: Path) -> float:
    return float(np.mean([r["epochs"] for r in read_csv(run, "low") if "epochs" in r]))


def ensure(group: str, seed: int, out: Path, train: bool) -> Path | None:
    run = out / group / f"seed{seed}"
    cmd = command(group, seed, run)
    if finished(run, STEPS):
        if changes := changed_settings(run, cmd[2:]):
            sys.exit(f"{run} was made with settings its command no longer gives ({'; '.join(changes)}); "
                     f"remove it to train it again, or pin the run's values in GROUPS[{group!r}]")
        return run
    if not train:
        return None
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return run


def table(out: Path, groups: list[str], seeds: list[int], train: bool) -> list[str]:
    lines = ["| group | settings | gain per seed | mean gain [95% t interval] | every seed >= +15 "
             "| epochs per update |",
             "|---|---|---|---|---|---|"]
    for group in groups:
        runs = [ensure(group, s, out, train) for s in seeds]
        done = [r for r in runs if r is not None]
        if not done:
            lines.append(f"| {group} | {GROUPS[group][1]} | (not run) | | | |")
            continue
        gains = [gain(r)[2] for r in done]
        m, lo, hi = seeds_ci([[g] for g in gains])
        per_seed = ", ".join(f"{g:+.1f}" for g in gains) + ("" if len(done) == len(seeds) else " (incomplete)")
        every = "yes" if len(done) == len(seeds) and min(gains) >= TARGET else "no"
        settings = " ".join(GROUPS[group][0]) or "(none)"
        lines.append(f"| {group} | {GROUPS[group][1]}: `{settings}` | {per_seed} | {m:+.1f} [{lo:+.1f}, {hi:+.1f}] "
                     f"| {every} | {np.mean([epochs_per_update(r) for r in done]):.1f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default="runs/evidence/spread-default",
                   help="folder of the runs (finished ones are reused)")
    p.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, from {', '.join(GROUPS)}")
    p.add_argument("--held-out", type=int, nargs="*", default=[3, 4],
                   help="seeds run after the default was chosen, for the default and the previous one")
    p.add_argument("--report-only", action="store_true", help="train nothing; report the finished runs")
    p.add_argument("--write", metavar="DIR", help="write DIR/spread-default.md")
    args = p.parse_args(argv)
    groups = [g for g in args.groups.split(",") if g]
    if unknown := [g for g in groups if g not in GROUPS]:
        p.error(f"unknown group(s) {unknown}; use some of {', '.join(GROUPS)}")
    lines = table(Path(args.out), groups, args.seeds, not args.report_only)
    if args.held_out:
        lines += ["", f"Seeds {args.held_out}, run after the default was chosen on the seeds above:", "",
                  *table(Path(args.out), ["default", "previous"], args.held_out, not args.report_only)]
    print("\n".join(lines))
    if args.write:
        cmd = " ".join(command("default", 0, Path(args.out) / "default" / "seedS")).replace("--seed 0", "--seed S")
        text = ["# One default on simple_spread", "",
                f"A flat team of 3 agents on MPE simple_spread (hdppo's numpy port, 25 cycles), {STEPS:,} env",
                f"steps per run, 2 process workers x 16 copies, seeds {args.seeds}. Gain: training team return over",
                "the last 10% of the steps minus the first logged value. Report: `python",
                "examples/evidence/spread_default.py --write docs/evidence`. Each run of the default:",
                f"`{cmd}`; the other groups add their settings.", "", *lines, ""]
        (Path(args.write) / "spread-default.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
