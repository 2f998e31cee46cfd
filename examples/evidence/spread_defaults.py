"""Evidence for the default config: a flat team on MPE simple_spread (3 agents, 25 cycles), the
benchmark a user compares with MAPPO first, 3 seeds at 300k env steps, team return over training.

    python examples/evidence/spread_defaults.py --write docs/evidence \
        --before runs/evidence/spread-defaults/before-seed0 runs/evidence/spread-defaults/before-seed1 ...

Runs with the current defaults are trained (or reused when finished) under --out; `--before` adds
run folders made by another version of hdppo (e.g. the commit before a change of defaults) as a
second group. `epochs=4 lr_decay=true clip_vloss=false` are pinned: the runs were made under those defaults, and this
report is about the change of value_norm and centralized. The report gives, per seed, the first
logged team return, the final one (mean of the last 5 logged values) and the change, with a
Student-t interval across seeds.
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

TASK = ["n_agents=3", "squad_size=3", "max_cycles=25", "layers=1", "epochs=4", *OLD_SCHEDULES]
STEPS = 300_000


def command(seed: int, out: Path) -> list[str]:
    return ["hdppo", "train", "spread", *TASK, "--steps", str(STEPS), "--seed", str(seed), "--out", str(out),
            "--no-progress"]


def curve(run: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in read_csv(run, "run") if np.isfinite(r.get("team_return", np.nan))]
    return np.array([r["step"] for r in rows]), np.array([r["team_return"] for r in rows])


def summary(runs: list[Path]) -> list[tuple[str, float, float, float]]:
    out = []
    for run in runs:
        _, y = curve(run)
        out.append((run.name, float(y[0]), float(y[-5:].mean()), float(y[-5:].mean() - y[0])))
    return out


def table(label: str, rows: list[tuple[str, float, float, float]]) -> list[str]:
    lines = [f"| {label}: run | first | final | change |", "|---|---|---|---|"]
    lines += [f"| {name} | {a:.1f} | {b:.1f} | {d:+.1f} |" for name, a, b, d in rows]
    m, lo, hi = seeds_ci([[d] for *_, d in rows])
    lines.append(f"| mean change, 95% t interval across seeds | | | **{m:+.1f}** [{lo:+.1f}, {hi:+.1f}] |")
    return lines


def plot(groups: dict[str, list[Path]], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for (label, runs), color in zip(groups.items(), ("tab:red", "tab:blue")):
        grid = np.linspace(0, STEPS, 61)
        ys = []
        for run in runs:
            x, y = curve(run)
            ax.plot(x, y, color=color, alpha=0.25, lw=1)
            ys.append(np.interp(grid, x, y))
        ax.plot(grid, np.mean(ys, axis=0), color=color, lw=2.5, label=f"{label} (mean of {len(runs)} seeds)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("team return (3 agents, 25 steps)")
    ax.set_title("simple_spread, flat team, default config")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default="runs/evidence/spread-defaults",
                   help="folder of the runs (finished ones are reused)")
    p.add_argument("--before", nargs="*", default=[], help="run folders of another hdppo version, shown beside")
    p.add_argument("--before-label", default="before")
    p.add_argument("--write", metavar="DIR", help="write DIR/spread-defaults.md and .png")
    args = p.parse_args(argv)
    after = []
    for seed in args.seeds:
        run = Path(args.out) / f"after-seed{seed}"
        if finished(run, STEPS) and (changes := changed_settings(run, command(seed, run)[2:])):
            sys.exit(f"{run} was made with settings its command no longer gives ({'; '.join(changes)}); "
                     "remove it to train it again, or pin the run's values in TASK")
        if not finished(run, STEPS):
            print(" ".join(command(seed, run)), flush=True)
            subprocess.run(command(seed, run), check=True)
        after.append(run)
    groups = {"later defaults (epochs=4)": after}
    if args.before:
        groups = {args.before_label: [Path(r) for r in args.before], **groups}
    lines = []
    for label, runs in groups.items():
        lines += table(label, summary(runs)) + [""]
    print("\n".join(lines))
    if args.write:
        out = Path(args.write)
        plot(groups, out / "spread-defaults.png")
        (out / "spread-defaults.md").write_text(report(lines, args))


def report(lines: list[str], args: argparse.Namespace) -> str:
    cmd = " ".join(command(0, Path(args.out) / "after-seedS")).replace("--seed 0", "--seed S")
    return "\n".join([
        "# The default config on simple_spread",
        "",
        "A flat team (`layers=1`) of 3 agents on MPE simple_spread (25 cycles, local ratio 0.5),",
        f"{STEPS:,} env steps per run, 2 process workers x 16 copies, seeds {args.seeds}.",
        "",
        f"Each run: `{cmd}`. Report: `python examples/evidence/spread_defaults.py --write docs/evidence"
        + (f" --before-label '{args.before_label}' --before {' '.join(args.before)}`; the `--before` runs are"
           " the same command run by that version of hdppo (e.g. a `git worktree` of the commit)."
           if args.before else "`."),
        "",
        "The earlier defaults normalised rewards per worker and gave each unit its own critic with no",
        "value normalisation; the later ones leave rewards as they are, standardise the critic's",
        "targets (value_norm) and give the critic the layer's joint state (centralized), as hdppo's",
        "defaults still do; both ran `epochs=4`, the default then (now 16). Both groups",
        "also differ in the engine fixes made with them (rollout-end bootstrap, per-stage schedules).",
        "",
        "![team return over training](spread-defaults.png)",
        "",
        *lines,
        "",
    ])


if __name__ == "__main__":
    main()
