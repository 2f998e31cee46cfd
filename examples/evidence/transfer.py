"""The transfer study (issue 22, part 3): unit skills trained on one task, reused frozen under a fresh
commander on another, against a flat team from scratch there and a flat team fine-tuned from the
first task.

    python examples/evidence/transfer.py --write docs/evidence   # docs/evidence/transfer-skirmish.md, -warehouse.md

Per task pair (`--task skirmish warehouse`: the first task, the *source*, and the second, the
*target*, are two maps / opponents of one scenario whose units observe and act the same), per seed:

- `transfer`: `hdppo train SOURCE --skills` for `--skill-steps` frames (the units learn to reach the
  goals of an untrained commander), then on the target a fresh commander and squads over those
  units, frozen: `--layer high,mid --load low=SKILLRUN`, the upper layers on the env reward;
- `flat`, `flat_shaped`: a flat team from scratch on the target, on the env reward and with the
  scenario's goal-free shaping where it has one (skirmish's `w_int.low=0.1 unit_shaping=progress`;
  warehouse has none);
- `finetuned`: a flat team trained on the source for `--pretrain-steps` frames, then trained on on
  the target from those weights (`--layer all --load low=PRETRAINRUN`: `--load` on a layer that is
  trained is a warm start, docs/skills.md).

Every arm's run on the target has the same budget (`--steps`). The metric (the issue's target is
<= 0.3): the target frames until a seed's training curve (the outcome over the last 200 episodes,
metrics/run.csv) first reaches the from-scratch flat team's final outcome (the better flat arm's,
by mean final eval, as in examples.studies.protocol; its seed-mean curve's final value), as a
fraction of the budget, per seed, with a 95% Student-t interval across the seeds. The source
frames (the skill run's, the pretraining's) are reported, and not counted in that fraction; a
second column adds them. Beside the target, the report gives the protocol's comparison: the transfer
arm's fractions minus the better flat arm's own (a Welch interval across the seeds), with and
without the source frames. Final teams are played for `--episodes` fresh episodes
(examples.studies.evidence.final_episodes). Finished runs in `--out`/transfer-TASK are reused,
`--report-only` skips training, `--set KEY=VALUE` adds a key to every run (e.g. workers=1).

The report's data file, NAME-runs.json beside NAME.md (NAME-TAG-runs.json with --tag; in --write
DIR, else the runs' folder), keeps one record per arm and seed (examples.studies.protocol's
records): the final eval, the training curve on the target (thinned; the frames to the threshold
are read off it), frames and minutes with the source run's, and the commands, configs and
provenance of the arm's runs. Each arm's seed is written as soon as its runs (its source run's
first) finish, so a campaign cut off keeps the arms it finished, and the same command on a machine
without the run folders trains only the arms with no fitting record (same arm, seed, budgets, eval
episodes and seed, `also` keys); a finished run folder is always read and its record rewritten. A
record whose settings the code no longer makes is refused, naming them. `--report-only` with seeds
missing reports the seeds whose every arm is done and names the rest as pending.

The task pairs and budgets below are chosen from the scenarios' mechanics, not tuned by runs:
docs/skills.md (section 7, "The transfer study") says why. `--task warehouse_orders` repeats the
warehouse pair with a library paid only for its orders (`off_goal_pick=-1`); it trains its own skill
and transfer runs (OUT/transfer-warehouse/skills-orders-seedN, transfer-orders-seedN) and reuses the
warehouse pair's flat and fine-tuned runs there.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies import protocol
from examples.studies.evidence import (
    MIN_EPISODES,
    final_episodes,
    final_value,
    finished,
    first_value,
    outcome_curve,
    save_png,
    train_run,
)
from examples.studies.protocol import (
    EVAL_SEED,
    FLAT,
    SHAPED,
    Records,
    _ci,
    _frames,
    _k,
    _mean,
    _minutes,
    _per,
    across,
    add_record,
    base_record,
    better_flat,
    campaign,
    check_budget_record,
    check_runs,
    commander_record,
    diagnose,
    diagnostics_lines,
    incomplete,
    on_grid,
    paired_ci,
    reach_ci,
    seeds_mean,
    seeds_t_ci,
    verdict_head,
)
from hdppo import provenance
from hdppo.stats import CI, diff_ci

SCRIPT = "examples/evidence/transfer.py"
TRANSFER, FINETUNED = "transfer", "finetuned"         # the arms that bring something from the source
SKILLS, PRETRAIN = "skills", "pretrain"               # their runs on the source
SOURCE = {TRANSFER: SKILLS, FINETUNED: PRETRAIN}      # an arm's run on the source, trained before its own
GOAL = 0.3                                            # the target fraction of the from-scratch budget
TITLES = {TRANSFER: "skills from the source, frozen, under a fresh commander",
          FLAT: "flat from scratch, env reward", SHAPED: "flat from scratch, goal-free shaping",
          FINETUNED: "flat trained on the source, then fine-tuned"}


@dataclass
class Task:
    """A scenario and the keys that make one map / opponent of it."""

    scenario: str
    keys: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return " ".join([self.scenario, *self.keys])


@dataclass
class TransferPlan:
    name: str                           # the report's file name
    outcome: str                        # episode key of `hdppo eval` and metrics/run.csv
    source: Task
    target: Task
    steps: int                          # env frames of every arm's run on the target
    skill_steps: int                    # the skill library's run on the source
    pretrain_steps: int                 # the fine-tuned flat team's run on the source
    flat: list[str]                     # `hdppo train` keys of the flat team (both tasks)
    flat_shaped: list[str] | None       # the flat team with the goal-free shaping (None: the scenario has none)
    hier: list[str]                     # the hierarchy's keys (its skill run's too)
    skill_args: list[str] = field(default_factory=list)     # further keys of the skill run only
    skill_layer: str = "low"
    then: str = "high,mid"              # the layers the transfer arm trains over the frozen skills
    flat_layer: str = "low"             # the flat team's one layer (what the fine-tune loads)
    finetune_from: str = FLAT           # the flat arm whose keys the pretrained, fine-tuned team has
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    common: list[str] = field(default_factory=list)         # keys of every run
    eval_episodes: int = 100
    out: Path = Path("runs/evidence/transfer")
    also: list[str] = field(default_factory=list)           # further episode keys from the final eval
    rate: bool = False                  # the outcome is a rate: its intervals are clipped to [0, 1]
    threshold: float | None = None      # None: the better from-scratch flat arm's final training value
    goal: float = GOAL
    folder: str | None = None           # the runs' subfolder of --out (default: name): plans may share flat runs
    hier_runs: str = ""                 # a suffix of the skill and transfer runs' folders (a plan sharing `folder`)

    def __post_init__(self) -> None:
        if min(self.steps, self.skill_steps, self.pretrain_steps) < 1:
            raise ValueError("every run needs a budget of at least 1 env frame")
        if self.finetune_from not in self.flat_arms():
            raise ValueError(f"finetune_from={self.finetune_from!r} is not one of the flat arms {self.flat_arms()}")

    def flat_arms(self) -> list[str]:
        return [FLAT] + ([SHAPED] if self.flat_shaped is not None else [])

    def arms(self) -> list[str]:
        """The arms on the target, in the report's order."""
        return [TRANSFER, *self.flat_arms(), FINETUNED]

    def args(self, run: str) -> list[str]:
        if run in (TRANSFER, SKILLS):
            return self.hier
        if run in (FINETUNED, PRETRAIN):
            return self.args(self.finetune_from)
        return self.flat if run == FLAT else list(self.flat_shaped or [])

    def run_dir(self, run: str, seed: int) -> Path:
        return self.out / f"{run}{self.hier_runs if run in (SKILLS, TRANSFER) else ''}-seed{seed}"

    def _train(self, task: Task, steps: int, seed: int, run: str) -> list[str]:
        return ["hdppo", "train", task.scenario, "--steps", str(steps), "--seed", str(seed),
                "--out", str(self.run_dir(run, seed)), "--no-progress"]

    def command(self, run: str, seed: int) -> list[str]:
        """The `hdppo train` command of one run (an arm on the target, or SKILLS / PRETRAIN on the source)."""
        if run == SKILLS:
            return [*self._train(self.source, self.skill_steps, seed, run), "--skills", *self.common,
                    *self.source.keys, *self.hier, *self.skill_args]
        if run == PRETRAIN:
            return [*self._train(self.source, self.pretrain_steps, seed, run), "--layer", "all", *self.common,
                    *self.source.keys, *self.args(run)]
        head = self._train(self.target, self.steps, seed, run)
        if run == TRANSFER:
            load = ["--layer", self.then, "--load", f"{self.skill_layer}={self.run_dir(SKILLS, seed)}"]
        elif run == FINETUNED:
            load = ["--layer", "all", "--load", f"{self.flat_layer}={self.run_dir(PRETRAIN, seed)}"]
        else:
            load = ["--layer", "all"]
        return [*head, *load, *self.common, *self.target.keys, *self.args(run)]

    def budget(self, run: str) -> int:
        return {SKILLS: self.skill_steps, PRETRAIN: self.pretrain_steps}.get(run, self.steps)

    def runs(self, arm: str) -> list[str]:
        """The runs of an arm on the target in training order: its source run (if any), then its own."""
        return [SOURCE[arm], arm] if arm in SOURCE else [arm]

    def jobs(self, seed: int) -> list[tuple[Path, list[str], int]]:
        """(run folder, command, env frames) of the seed's runs, each source run before the arm it feeds."""
        return [(self.run_dir(r, seed), self.command(r, seed), self.budget(r))
                for arm in self.arms() for r in self.runs(arm)]

    def budgets(self) -> dict[str, int]:
        return {"steps": self.steps, "skill_steps": self.skill_steps, "pretrain_steps": self.pretrain_steps}


PLANS: dict[str, TransferPlan] = {
    # skirmish: units trained on the default 20x20 map against difficulty 0.4, reused on a 32x32 map
    # against 0.6 (same team, same 3 points: the units' observation and goals keep their widths)
    "skirmish": TransferPlan(
        name="transfer-skirmish", outcome="win", source=Task("skirmish"),
        target=Task("skirmish", ["size=32", "difficulty=0.6"]), steps=1_000_000, skill_steps=200_000,
        pretrain_steps=1_000_000, flat=["layers=1"], flat_shaped=["layers=1", "w_int.low=0.1", "unit_shaping=progress"],
        hier=["layers=3"], then="high,mid",
        skill_args=["interval.mid=16", "interval.high=32", "goal_sampler=team", "unit_shaping=progress"],
        finetune_from=SHAPED,
        common=["workers=2"], out=Path("runs/evidence/transfer-skirmish"), also=["enemies_killed", "units_lost"],
        rate=True),
    # warehouse: robots trained in the default 12x10 warehouse with 2 stations, reused in a 16x14 one
    # with 3 stations (a robot's observation has the same width in any layout)
    "warehouse": TransferPlan(
        name="transfer-warehouse", outcome="delivery_rate", source=Task("warehouse"),
        target=Task("warehouse", ["width=16", "height=14", "n_stations=3"]), steps=500_000, skill_steps=100_000,
        pretrain_steps=500_000, flat=["layers=1"], flat_shaped=None, hier=["layers=3"], then="high,mid",
        common=["workers=2"], out=Path("runs/evidence/transfer-warehouse"), also=["deliveries"], rate=True),
}
# warehouse_orders: the same pair with robots that are paid only for their orders (`off_goal_pick=-1`,
# docs/scenarios/warehouse.md: under the default every delivery pays, and the library ignores its
# orders); its flat arms are the warehouse plan's own runs (the flat teams have no goal reward)
PLANS["warehouse_orders"] = dataclasses.replace(
    PLANS["warehouse"], name="transfer-warehouse-orders", folder="transfer-warehouse", hier_runs="-orders",
    hier=["layers=3", "off_goal_pick=-1"])


# ---- training ----------------------------------------------------------------------------------
def check_budget(plan: TransferPlan, write: bool) -> None:
    """The plan's budgets against OUT/transfer.json (one set of budgets per folder)."""
    check_budget_record(plan.out, "transfer.json", plan.budgets(), write)


def train_all(plan: TransferPlan, log: Callable[[str], None] = print, known: Records | None = None,
              data: Path | None = None) -> None:
    """Train every missing run (an arm's source run before it), but those of the arms whose record the
    report's data file holds (`known`, from_records). With `data`, each arm's seed is written to that
    data file as soon as its runs finish, so a campaign cut off keeps the arms it finished."""
    check_budget(plan, write=True)
    kept = from_records(plan, known)
    for seed in plan.seeds:
        for arm in plan.arms():
            if (arm, seed) in kept:
                log(f"reuse  {arm} seed {seed}: its record in the report's data file")
                continue
            for run in plan.runs(arm):
                train_run(plan.run_dir(run, seed), plan.command(run, seed), plan.budget(run),
                          plan.out / "timings.json", log)
            if data is not None:
                add_record(data, run_record(plan, arm, seed), plan.outcome, log, plan.arms())


# ---- the seeds' records ------------------------------------------------------------------------
# As examples.studies.protocol's: what the report needs from one arm's seed on the target, taken
# from its run folders (its source run's included) once and kept in the report's data file,
# NAME-runs.json beside NAME.md, so the report can be rewritten, and a campaign continued, after
# the run folders are gone. The frames to the threshold are not kept (the threshold depends on every
# arm): they are read off the record's training curve (thinned to protocol.CURVE_POINTS points).
def run_record(plan: TransferPlan, arm: str, seed: int, eval_seed: int = EVAL_SEED) -> dict[str, Any]:
    """One arm's seed from its finished run folders: the final eval on the target (played once, cached
    in the run), the training curve on the target, frames and minutes (the source run's too), and
    the commands, configs and provenance of its runs (the source run first)."""
    runs = plan.runs(arm)
    source = SOURCE.get(arm)
    rec = base_record(plan, arm, seed, [plan.run_dir(r, seed) for r in runs],
                       [plan.command(r, seed) for r in runs], outcome_curve(plan.run_dir(arm, seed), plan.outcome),
                       plan.budgets(), eval_seed, frames=frames(plan.run_dir(arm, seed)),
                       source_frames=frames(plan.run_dir(source, seed)) if source else None,
                       minutes=run_minutes(plan, arm, seed),
                       source_minutes=run_minutes(plan, source, seed) if source else None)
    if arm == TRANSFER:      # the protocol's diagnostics of a hierarchy: its fresh commander over the skills
        rec.update(commander_record(plan.run_dir(arm, seed), plan.eval_episodes, eval_seed + seed, plan.outcome))
        rec.update(skills_alone(plan, seed, eval_seed))
    return rec


def skills_alone(plan: TransferPlan, seed: int, eval_seed: int = EVAL_SEED) -> dict[str, float]:
    """The skill run's own team (the units under the upper layers as that run left them: untrained,
    so scripted or uniform) played on the source and, with the target's keys, on the target: how
    much of the skill survives the move before any commander is trained over it."""
    run, episodes = plan.run_dir(SKILLS, seed), plan.eval_episodes
    moved = dict(k.split("=", 1) for k in plan.target.keys)
    home = final_episodes(run, episodes, eval_seed + seed, keys=(plan.outcome,))
    away = final_episodes(run, episodes, eval_seed + seed, keys=(plan.outcome,), overrides=moved)
    return {"skills_source": _mean(home, plan.outcome), "skills_target": _mean(away, plan.outcome)}


def arm_commands(plan: TransferPlan, arm: str, seed: int) -> list[list[str]]:
    """The `hdppo train` commands of one arm's seed: its source run's, then its own."""
    return [plan.command(r, seed) for r in plan.runs(arm)]


def finished_here(plan: TransferPlan, arm: str, seed: int) -> bool:
    """Whether every run of the arm's seed (its source run's included) is finished in the runs' folder."""
    return all(finished(plan.run_dir(r, seed), plan.budget(r)) for r in plan.runs(arm))


def fits(plan: TransferPlan, record: dict[str, Any] | None, arm: str, seed: int, eval_seed: int = EVAL_SEED) -> bool:
    """Whether a data file's record is of this arm and seed at the plan's budgets, eval and keys."""
    return protocol.fits(plan, record, arm, seed, eval_seed, budget=plan.budgets())


def from_records(plan: TransferPlan, known: Records | None, eval_seed: int = EVAL_SEED) -> Records:
    """The arms' seeds to take from the data file: a fitting record there, and the arm's runs not all
    finished here (a finished run folder is always read, and its record rewritten)."""
    return protocol.from_records(plan, known, eval_seed, arms=plan.arms(), budget=plan.budgets(),
                                 here=lambda arm, seed: finished_here(plan, arm, seed))


def stale_records(plan: TransferPlan, known: Records | None) -> dict[str, list[str]]:
    """'ARM seed S' -> the settings where a data-file record this plan would use differs from what its
    runs' commands make with this code now."""
    return protocol.stale_records(plan, known, kept_by=from_records, commands_of=arm_commands)


def done(plan: TransferPlan, arm: str, seed: int, known: Records) -> bool:
    """Whether the arm's seed is recorded in the data file (and fits the plan) or its runs are finished."""
    return (arm, seed) in from_records(plan, known) or finished_here(plan, arm, seed)


# ---- the metric --------------------------------------------------------------------------------
def first_reach(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, threshold: float) -> float | None:
    """The env frame of the first curve point at or above `threshold` (None if none is)."""
    hit = np.flatnonzero(np.asarray(y, float) >= threshold)
    return float(np.asarray(x, float)[hit[0]]) if len(hit) else None


def fractions(reached: Sequence[float | None], budget: int, before: Sequence[int] | None = None) -> list[float | None]:
    """Frames to the threshold per seed as a fraction of the from-scratch budget, None where a seed
    never reached it; `before` (per seed) adds frames spent elsewhere first (the source runs)."""
    extra = list(before) if before is not None else [0] * len(reached)
    return [None if r is None else (r + e) / budget for r, e in zip(reached, extra)]


def judge(per_seed: Sequence[float | None], goal: float = GOAL) -> dict[str, Any]:
    """The seeds' fractions: how many reached the threshold, their mean with a Student-t interval
    (protocol.reach_ci), and the verdict against `goal`: 'meets' (every seed reached it and the
    interval lies at or below the goal), 'mean only' (the mean does, the interval reaches past),
    'does not meet' (a seed never reached it, or the mean is above the goal), 'not judged'
    (fewer than 2 seeds: no interval)."""
    out = reach_ci(list(per_seed))
    m, lo, hi = out["ci"]
    if len(per_seed) < 2:
        out["verdict"] = "not judged"
    elif out["reached"] < len(per_seed) or not m <= goal:
        out["verdict"] = "does not meet"
    else:
        out["verdict"] = "meets" if hi <= goal else "mean only"
    return out


def versus(mine: Sequence[float | None], theirs: Sequence[float | None]) -> dict[str, Any]:
    """One arm's fractions of the budget minus another's (hdppo.stats.diff_ci: Welch, 95%, over the
    seeds that reached the threshold), and what the interval says: 'sooner' (it lies below 0),
    'later' (above 0), 'not apart' (it holds 0), 'not judged' (fewer than 2 seeds reached it in an arm)."""
    diff: CI = diff_ci([v for v in mine if v is not None], [v for v in theirs if v is not None])
    if not np.isfinite(diff[1]):
        reading = "not judged"
    else:
        reading = "sooner" if diff[2] < 0 else "later" if diff[1] > 0 else "not apart"
    return {"diff": diff, "reading": reading}


# ---- the summary -------------------------------------------------------------------------------
def frames(run: Path) -> int:
    return int(json.loads((run / "state.json").read_text()).get("env_steps", 0))


def run_minutes(plan: TransferPlan, run: str, seed: int) -> float | None:
    """Wall minutes of one seed's run (OUT/timings.json, as evidence.train_run writes it), None where
    not timed here."""
    timings = plan.out / "timings.json"
    times = json.loads(timings.read_text()) if timings.is_file() else {}
    name = plan.run_dir(run, seed).name
    return times[name] / 60.0 if name in times else None


def _curve(record: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(record["curve"][0], float), np.asarray(record["curve"][1], float)


def summarize(plan: TransferPlan, eval_seed: int = EVAL_SEED, known: Records | None = None) -> dict[str, Any]:
    """Per arm the final evals and their interval; the threshold; per seed the frames and fraction of
    the budget to reach it, with and without the source frames; the frozen units' goal success. From
    each arm's seed's record (its run folders', or the report's data file's where `known` holds one
    that fits and the runs are not finished here): `records`, the data file's content."""
    kept = from_records(plan, known, eval_seed)
    records = {(arm, s): kept.get((arm, s)) or run_record(plan, arm, s, eval_seed)
               for arm in plan.arms() for s in plan.seeds}
    grid = np.linspace(0, max(plan.steps, *(r["frames"] for r in records.values())), 101)
    arms: dict[str, Any] = {}
    for arm in plan.arms():
        recs = [records[arm, s] for s in plan.seeds]
        finals = [r["final"] for r in recs]
        goals: dict[str, list[float]] = {}
        for rec in recs:
            for layer, by_goal in rec["goals"].items():
                n, ok = by_goal["all"]
                goals.setdefault(layer, []).append(ok / n if n else float("nan"))
        curves = [on_grid(*_curve(r), grid) for r in recs]
        curve = seeds_mean(curves)
        source = arm in SOURCE
        arms[arm] = {"args": plan.args(arm), "per_seed": finals, "ci": seeds_t_ci(finals, plan.rate),
                     "team_return": across([r["team_return"] for r in recs]),
                     "also": {k: across([r["also"][k] for r in recs]) for k in plan.also},
                     "goal_success": {k: {"per_seed": v, "ci": seeds_t_ci(v, rate=True)} for k, v in goals.items()},
                     "curve": curve.tolist(), "curve_final": final_value(curve),
                     "seed_curves": [c.tolist() for c in curves], "frames": [r["frames"] for r in recs],
                     "source_frames": [r["source_frames"] for r in recs] if source else None,
                     "minutes": [r["minutes"] for r in recs],
                     "source_minutes": [r["source_minutes"] for r in recs] if source else None,
                     "commands": [c for r in recs for c in r["commands"]]}
    flat_finals = {a: arms[a]["per_seed"] for a in plan.flat_arms()}
    ref = better_flat(flat_finals) if SHAPED in flat_finals else FLAT
    out: dict[str, Any] = {"arms": arms, "grid": grid.tolist(), "reference": ref, "budgets": plan.budgets()}
    threshold, source_of = plan.threshold, "given"
    if threshold is None:
        target, start = arms[ref]["curve_final"], first_value(np.asarray(arms[ref]["curve"]))
        if np.isfinite(target) and target > start:
            threshold, source_of = target, "reference final"
        else:
            threshold, source_of = None, "not improved" if np.isfinite(target) else "no curve"
    out["threshold"], out["threshold_source"] = threshold, source_of
    for arm in plan.arms():
        if threshold is None:
            arms[arm]["to_threshold"] = None
            continue
        steps = [first_reach(*_curve(records[arm, s]), threshold) for s in plan.seeds]
        frac = fractions(steps, plan.steps)
        entry = {"steps": steps, "fraction": judge(frac, plan.goal)}
        if arms[arm]["source_frames"] is not None:
            entry["counted"] = judge(fractions(steps, plan.steps, arms[arm]["source_frames"]), plan.goal)
        arms[arm]["to_threshold"] = entry
    if threshold is not None:        # the protocol's question: sooner than the better flat arm from scratch?
        mine, theirs = arms[TRANSFER]["to_threshold"], arms[ref]["to_threshold"]["fraction"]["per_seed"]
        out["versus_reference"] = {"fraction": versus(mine["fraction"]["per_seed"], theirs),
                                   "counted": versus(mine["counted"]["per_seed"], theirs)}
    mine = [records[TRANSFER, s] for s in plan.seeds]
    out["why"] = diagnose(mine, plan.rate) if all("random_top" in r for r in mine) else None
    if all("skills_target" in r for r in mine):
        home, away = [r["skills_source"] for r in mine], [r["skills_target"] for r in mine]
        out["skills_alone"] = {"source": {"per_seed": home, "ci": seeds_t_ci(home, plan.rate)},
                               "target": {"per_seed": away, "ci": seeds_t_ci(away, plan.rate)},
                               "target_minus_source": paired_ci(away, home)}
    out["records"] = list(records.values())
    return out


# ---- the report --------------------------------------------------------------------------------
VERDICTS = {"meets": "meets the target", "mean only": "mean within the target, the interval not",
            "does not meet": "does not meet the target", "not judged": "not judged (fewer than 2 seeds)"}


def _fraction(j: dict[str, Any]) -> str:
    m, lo, hi = j["ci"]
    if not np.isfinite(m):
        return "-"
    return f"{m:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else " (one seed: no interval)")


def _fractions(values: Sequence[float | None]) -> str:
    return ", ".join("-" if v is None else f"{v:.2f}" for v in values)


READINGS = {"sooner": "sooner than it (the interval lies below 0)",
            "later": "later than it (the interval lies above 0)",
            "not apart": "not shown apart from it (the interval holds 0)",
            "not judged": "not judged (fewer than 2 seeds reached the threshold in an arm)"}


def versus_lines(vs: dict[str, Any], ref: str) -> list[str]:
    """The transfer arm against the better flat arm from scratch, the protocol's baseline."""
    f, c = vs["fraction"], vs["counted"]
    return [f"**Against the better flat arm from scratch** (`{ref}`, the protocol's baseline; the target above asks "
            f"less): the transfer arm's fraction minus `{ref}`'s is **{_ci(f['diff'])}** (Welch, 95%, over the "
            f"seeds that reached it), {READINGS[f['reading']]}; counting the source frames, {_ci(c['diff'])}, "
            f"{READINGS[c['reading']]}."]


def markdown(plan: TransferPlan, summary: dict[str, Any], png_name: str, command: str,
             made: dict[str, Any] | None = None) -> str:
    arms, o, n = summary["arms"], plan.outcome, len(plan.seeds)
    pending = summary.get("pending", [])
    runs = (n + len(pending)) * (len(plan.arms()) + len(SOURCE))
    lines = [f"# Evidence: transfer, {plan.source.describe()} -> {plan.target.describe()}", "",
             f"Reproduce with `{command}` ({runs} training runs; finished ones are reused).",
             *incomplete(pending, plan.seeds, "The study's verdict needs all of them."), "",
             f"The first task (the source) is `{plan.source.describe()}`, the second (the target) "
             f"`{plan.target.describe()}`. Every arm trains **{plan.steps:,} env frames on the target** per run; "
             f"`{TRANSFER}` first trains a skill library on the source for {plan.skill_steps:,} frames (`hdppo train "
             f"--skills`), then a fresh `{plan.then}` over those units, frozen (`--layer {plan.then} --load "
             f"{plan.skill_layer}=SKILLRUN`, the upper layers on the env reward); `{FINETUNED}` first trains the flat "
             f"team (`{FINETUNED}`'s keys: those of `{plan.finetune_from}`) on the source for {plan.pretrain_steps:,} "
             f"frames, then trains those weights on the target (`--layer all --load {plan.flat_layer}=PRETRAINRUN`). "
             + (f"Every run has `{' '.join(plan.common)}`. " if plan.common else "")
             + f"Seeds {plan.seeds}; each final team is played for {plan.eval_episodes} fresh episodes on the target "
             f"(`hdppo.runtime.evaluate.play`, sampled actions, eval seed 12345 + the seed). Intervals are 95% "
             f"Student-t intervals across the seeds ({n} seeds)" + ("; a rate's clipped to [0, 1]" if plan.rate
                                                                   else "") + ".", "",
             f"| arm | frames on the source | `hdppo train` keys | frames on the target | final {o} (eval) | per seed "
             "| team return | " + "".join(f"{k} | " for k in plan.also) + "training min per run (target; source) |",
             "|---|---:|---|---:|---|---|---|" + "---|" * len(plan.also) + "---:|"]
    ref = summary["reference"]
    for arm in plan.arms():
        s = arms[arm]
        src = _frames(s["source_frames"]) if s["source_frames"] else "-"
        mark = " (the reference)" if arm == ref else ""
        mins = _minutes(s["minutes"]) + (f"; {_minutes(s['source_minutes'])}" if s["source_minutes"] else "")
        lines.append(f"| **{arm}**: {TITLES[arm]}{mark} | {src} | `{' '.join(s['args']) or 'defaults'}` | "
                     f"{_frames(s['frames'])} | {_ci(s['ci'])} | {_per(s['per_seed'])} | {_ci(s['team_return'])} | "
                     + "".join(f"{_ci(s['also'][k])} | " for k in plan.also) + f"{mins} |")
    lines += ["", f"![{o} on the target]({png_name})", ""]
    th = summary["threshold"]
    if th is None:
        why = (f"its training curve holds no point (a point averages the last 200 episodes and needs {MIN_EPISODES} "
               "finished ones: the budget is too small for a curve)" if summary["threshold_source"] == "no curve"
               else f"its {o} did not rise above where it started")
        lines.append(f"**No threshold:** the reference flat arm (`{ref}`) sets none, as {why}; the fraction is "
                     "not judged.")
    else:
        what = "given" if summary["threshold_source"] == "given" else (
            f"the final training value of the from-scratch flat team, `{ref}`, the better flat arm by mean final "
            f"eval (its seed-mean curve's last points)")
        lines += [f"**Frames to the from-scratch flat team's final:** the target frames until each seed's own "
                  f"training curve ({o} over the last 200 episodes) first reaches **{th:.3f}** ({what}), as a "
                  f"fraction of the {plan.steps:,}-frame budget; the mean and its 95% t interval over the seeds that "
                  f"reached it. The issue's target: at most **{plan.goal}**. The source frames are **not counted** "
                  "in that fraction (a skill library, trained once, serves any number of targets); the last columns "
                  "add them.", "",
                  "| arm | seeds that reached it | target frames (mean) | fraction of the budget (mean [95% CI]) | "
                  "per seed | verdict | counting the source frames: fraction | per seed | verdict |",
                  "|---|---|---:|---|---|---|---|---|---|"]
        for arm in plan.arms():
            t = arms[arm]["to_threshold"]
            f = t["fraction"]
            reached = [x for x in t["steps"] if x is not None]
            mean = _k(float(np.mean(reached))) if reached else "-"
            row = (f"| {arm} | {f['reached']} of {n} | {mean} | {_fraction(f)} | {_fractions(f['per_seed'])} | "
                   f"{VERDICTS[f['verdict']]} | ")
            c = t.get("counted")
            row += (f"{_fraction(c)} | {_fractions(c['per_seed'])} | {VERDICTS[c['verdict']]} |" if c
                    else "- | - | - |")
            lines.append(row)
        v = arms[TRANSFER]["to_threshold"]["fraction"]["verdict"]
        lines += ["", f"**{verdict_head(plan.seeds, pending)}: the transfer arm {VERDICTS[v]}** (at most "
                      f"{plan.goal} of the budget, every seed, the interval included)."]
        vs = summary.get("versus_reference")
        if vs and vs["fraction"]["reading"] != "not judged":     # else too few seeds reached it to compare
            lines += ["", *versus_lines(vs, ref)]
    if summary.get("why"):
        short = th is None or arms[TRANSFER]["to_threshold"]["fraction"]["verdict"] in ("does not meet", "mean only")
        head = "Why the transfer arm does not meet the target" if short else "What the transfer arm's parts do"
        lines += ["", *diagnostics_lines(summary["why"], o, arms[TRANSFER]["ci"], head, "the transfer arm")]
        if alone := summary.get("skills_alone"):
            src, tgt = alone["source"], alone["target"]
            lines += [f"- **The skill library alone** (its skill run's own team, the layers above the units "
                      f"untrained as in that run, {plan.eval_episodes} episodes a seed): {o} {_ci(src['ci'])} on the "
                      f"source (per seed {_per(src['per_seed'])}), {_ci(tgt['ci'])} on the target (per seed "
                      f"{_per(tgt['per_seed'])}); the move changes it by {_ci(alone['target_minus_source'])} "
                      "(paired by seed). What the units bring to the target is the second figure; the transfer "
                      "arm's trained upper layers end at the table's first row."]
    else:
        lines += ["", "The transfer arm's records predate its diagnostics (the random commander, its entropy): "
                      "rerun the report where its run folders are to add them."]
    lines += ["", "Runs (exact commands; each arm's source run before it):", ""]
    for arm in plan.arms():
        lines += [f"- `{c}`" for c in arms[arm]["commands"]]
    lines += ["", "Made by (each run's `provenance.json`, and the code that wrote this report):", ""]
    made_by = {provenance.describe(p) for rec in summary["records"] for p in rec["provenance"]}
    lines += [f"- runs: {m}" for m in sorted(made_by)]
    lines.append(f"- report: {provenance.describe(made or provenance.provenance())}")
    return "\n".join(lines) + "\n"


def plot(plan: TransferPlan, summary: dict[str, Any], png: Path) -> Path:
    """Left: the outcome on the target while training, per arm (seeds thin, their mean bold), the
    threshold. Right: the fraction of the budget to reach it per arm, with its interval and the goal."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bar) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    grid = np.asarray(summary["grid"])
    for i, arm in enumerate(plan.arms()):
        for rec in (r for r in summary["records"] if r["arm"] == arm):
            ax.plot(*rec["curve"], color=f"C{i}", alpha=0.3, linewidth=0.8)
        ax.plot(grid, summary["arms"][arm]["curve"], color=f"C{i}", linewidth=2,
                label=f"{arm} ({len(plan.seeds)} seeds)")
    if summary["threshold"] is not None:
        ax.axhline(summary["threshold"], color="grey", linestyle="--", linewidth=0.8,
                   label="threshold" if summary["threshold_source"] == "given" else f"{summary['reference']} final")
    ax.set_xlim(0, grid[-1])
    ax.set_xlabel("env frames on the target (source frames not shown)")
    ax.set_ylabel(f"{plan.outcome} (last 200 episodes)")
    ax.set_title(f"{plan.target.describe()}: {plan.outcome} while training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    for i, arm in enumerate(plan.arms()):
        t = summary["arms"][arm]["to_threshold"]
        if t is None or not np.isfinite(t["fraction"]["ci"][0]):
            continue
        m, lo, hi = t["fraction"]["ci"]
        bar.bar(i, m, color=f"C{i}", yerr=[[m - lo], [hi - m]] if np.isfinite(lo) else None, capsize=4)
    bar.axhline(plan.goal, color="black", linestyle=":", linewidth=1, label=f"target {plan.goal}")
    bar.set_xticks(range(len(plan.arms())), plan.arms(), rotation=15, fontsize=8)
    bar.set_ylabel("fraction of the budget to reach the threshold")
    bar.set_title("seeds that reached it, 95% t CI")
    bar.legend(fontsize=8)
    bar.grid(alpha=0.3, axis="y")
    return save_png(fig, png)


# ---- the command line --------------------------------------------------------------------------
def configure(plan: TransferPlan, args: argparse.Namespace) -> TransferPlan:
    """The plan with the command line's budgets, seeds, folder and keys (the given plan unchanged)."""
    for item in args.set:
        if "=" not in item:
            raise SystemExit(f"--set {item!r}: write KEY=VALUE, e.g. --set workers=1")
    keys = {item.partition("=")[0] for item in args.set}
    common = [a for a in plan.common if a.partition("=")[0] not in keys] + list(args.set)
    given = {"steps": args.steps, "skill_steps": args.skill_steps, "pretrain_steps": args.pretrain_steps,
             "eval_episodes": args.episodes, "threshold": args.threshold}
    try:
        return dataclasses.replace(plan, seeds=list(args.seeds), out=Path(args.out) / (plan.folder or plan.name),
                                   common=common,
                                   **{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def run(plan: TransferPlan, args: argparse.Namespace, command: str,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train what is missing (unless --report-only; arms whose record the data file holds are not
    trained again), summarize, write NAME.md, NAME.png, NAME-runs.json and OUT/summary.json. With
    --report-only, the seeds of which every arm is done are reported and the rest named as pending."""
    return campaign(plan, args, command, plan.arms(), done=done,
                    check=lambda p, known: check_runs(p, check_budget, known, stale_records), train=train_all,
                    summarize=lambda p, known: summarize(p, known=known), plot=plot, markdown=markdown, log=log)


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    given = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", SCRIPT, *[a for a in given if a != "--report-only"]])
    p = argparse.ArgumentParser(description="transfer: reused skills vs flat from scratch vs flat fine-tuned")
    p.add_argument("--task", nargs="+", choices=list(PLANS), default=list(PLANS), help="the task pairs to report")
    p.add_argument("--steps", type=int, help="env frames of every run on the target (default: the task's)")
    p.add_argument("--skill-steps", type=int, help="env frames of the skill run on the source")
    p.add_argument("--pretrain-steps", type=int, help="env frames of the flat team's run on the source")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--out", default="runs/evidence", help="folder of the runs, one subfolder per task (reused)")
    p.add_argument("--episodes", type=int, help="eval episodes per run (default 100)")
    p.add_argument("--threshold", type=float, help="the outcome to reach (default: the reference flat arm's final)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a further `hdppo train` key of every run (repeatable), e.g. --set workers=1")
    p.add_argument("--write", metavar="DIR", help="write DIR/NAME.md and DIR/NAME.png (default: into the runs' folder)")
    p.add_argument("--tag", default="", help="name the reports NAME-TAG.md/.png (e.g. a shorter budget)")
    p.add_argument("--report-only", action="store_true", help="skip training; report the runs in --out")
    args = p.parse_args(given)
    return {task: run(configure(PLANS[task], args), args, command) for task in args.task}


if __name__ == "__main__":
    main()
