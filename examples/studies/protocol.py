"""The evidence protocol every hierarchy report follows (issue 22, part 4), as a plan and a report.

Three arms at an equal number of env frames per seed: (i) `flat`, the flat team on the env reward;
(ii) `flat_shaped`, the flat team with the best goal-free shaping or exploration bonus the scenario
offers; (iii) `hier`, the hierarchy, its upper layers on the env reward only. An optional skills
stage (`hdppo train --skills`) trains the hierarchy's units first; its frames count in the
hierarchy's budget, whose own run then trains the rest of them on top of the loaded skills
(`--load low=SKILLRUN`). 5 seeds by default.

The report gives, per arm, the final outcome of `hdppo eval` per seed and the mean with a 95%
Student-t interval across the seeds' means; the hierarchy minus the better flat arm (chosen by mean
final outcome, and named) with a Welch interval; the verdict (the claim stands only if that
interval lies above 0); steps-to-threshold per seed with a t interval over the seeds that reach it
and how many did; training minutes per run. And why the hierarchy does as it does: goal success
per layer (from the eval), the commander's policy entropy late in training (metrics/TOP.csv), and
the final hierarchy with its commander replaced by uniformly random goals (`hdppo eval --uniform`).

Training, reuse of finished runs, the check that a finished run is still what its command makes,
and the cached final evals are examples.studies.evidence's. A scenario's script builds a
ProtocolPlan and calls `main(PLAN, "examples/evidence/SCRIPT.py")`.
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

from examples.studies.evidence import (
    MIN_EPISODES,
    final_episodes,
    final_value,
    finished,
    first_value,
    outcome_curve,
    refuse_stale,
    report,
    save_png,
    steps_to_reach,
    train_run,
)
from hdppo import provenance
from hdppo.engine.metrics import read_csv, scope_file
from hdppo.stats import CI, NAN, diff_ci, t_ci

FLAT, SHAPED, HIER = "flat", "flat_shaped", "hier"
ARMS = (FLAT, SHAPED, HIER)
FLAT_ARMS = (FLAT, SHAPED)
TITLES = {FLAT: "flat, env reward", SHAPED: "flat, goal-free shaping", HIER: "hierarchy, upper layers on env reward"}
LATE = 0.1      # "late in training": the last tenth of the hierarchy's own env steps
EVAL_SEED = 12345   # the final eval of seed S plays with seed EVAL_SEED + S


@dataclass
class SkillStage:
    """The hierarchy's first stage: `hdppo train --skills` of its bottom layer for `steps` env frames
    (counted in the hierarchy's budget), then the hierarchy's own run trains `then` (`--layer`) with
    the skills loaded (`--load LAYER=SKILLRUN`: frozen when `then` leaves that layer out)."""

    steps: int
    args: list[str] = field(default_factory=list)     # further arguments of the skill run only
    layer: str = "low"
    then: str = "high"

    @property
    def trains_skills(self) -> bool:
        """Whether the hierarchy's own run trains the skill layer on (a warm start) or keeps it frozen."""
        return self.then == "all" or self.layer in self.then.split(",")


@dataclass
class ProtocolPlan:
    scenario: str
    outcome: str                        # episode key of `hdppo eval` and metrics/run.csv (win, deliveries, ...)
    steps: int                          # env frames per run of every arm, the hierarchy's skill run included
    flat: list[str]                     # `hdppo train` arguments of arm (i)
    flat_shaped: list[str]              # arm (ii)
    hier: list[str]                     # arm (iii), given to its skill run too
    skills: SkillStage | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    common: list[str] = field(default_factory=list)    # arguments of every run
    eval_episodes: int = 100
    out: Path = Path("runs/evidence/protocol")
    also: list[str] = field(default_factory=list)      # further episode keys reported from the final eval
    threshold: float | None = None      # of steps-to-threshold; None: the better flat arm's final training value
    rate: bool = False                  # the outcome is a rate (win, success): its intervals are clipped to [0, 1]
    name: str = ""                      # the report's file name (default: the scenario's)
    notes: list[str] = field(default_factory=list)     # paragraphs of the report's Notes (earlier designs, ...)

    def __post_init__(self) -> None:
        if self.skills is not None and not 0 < self.skills.steps < self.steps:
            raise ValueError(f"the skill run's {self.skills.steps:,} env steps must be more than 0 and fewer than "
                             f"the hierarchy's budget of {self.steps:,}, which counts them")

    def args(self, arm: str) -> list[str]:
        return {FLAT: self.flat, SHAPED: self.flat_shaped, HIER: self.hier}[arm]

    def run_dir(self, arm: str, seed: int) -> Path:
        return self.out / f"{arm}-seed{seed}"

    def skill_dir(self, seed: int) -> Path:
        return self.out / f"{HIER}-skills-seed{seed}"

    def _train(self, steps: int, seed: int, out: Path) -> list[str]:
        return ["hdppo", "train", self.scenario, "--steps", str(steps), "--seed", str(seed), "--out", str(out),
                "--no-progress"]

    def skill_command(self, seed: int) -> list[str]:
        assert self.skills is not None
        return [*self._train(self.skills.steps, seed, self.skill_dir(seed)), "--skills", *self.common, *self.hier,
                *self.skills.args]

    def skill_frames(self, seed: int) -> int:
        """The skill run's env frames: what it trained once finished (a run ends on a whole rollout,
        so it may pass its budget by part of one), else its budget; 0 without a skills stage."""
        if self.skills is None:
            return 0
        state = self.skill_dir(seed) / "state.json"
        done = json.loads(state.read_text()).get("env_steps", 0) if state.is_file() else 0
        return int(done) if done >= self.skills.steps else self.skills.steps

    def arm_steps(self, arm: str, seed: int) -> int:
        """The env steps of the arm's own run: the budget, less the skill run's frames for the hierarchy."""
        return self.steps - self.skill_frames(seed) if arm == HIER else self.steps

    def command(self, arm: str, seed: int) -> list[str]:
        head = self._train(self.arm_steps(arm, seed), seed, self.run_dir(arm, seed))
        if arm == HIER and self.skills is not None:
            return [*head, "--layer", self.skills.then, "--load", f"{self.skills.layer}={self.skill_dir(seed)}",
                    *self.common, *self.hier]
        return [*head, "--layer", "all", *self.common, *self.args(arm)]

    def jobs(self, seed: int) -> list[tuple[Path, list[str], int]]:
        """(run folder, command, env steps) of the seed's runs, in training order (skills before the hierarchy)."""
        out = [(self.run_dir(arm, seed), self.command(arm, seed), self.arm_steps(arm, seed)) for arm in FLAT_ARMS]
        if self.skills is not None:
            out.append((self.skill_dir(seed), self.skill_command(seed), self.skills.steps))
        return out + [(self.run_dir(HIER, seed), self.command(HIER, seed), self.arm_steps(HIER, seed))]

    def budget(self) -> dict[str, int]:
        return {"steps": self.steps, "skill_steps": self.skills.steps if self.skills else 0}


# ---- training ----------------------------------------------------------------------------------
def check_budget_record(out: Path, name: str, budget: Any, write: bool) -> None:
    """Runs in OUT belong to one budget, recorded in OUT/NAME: finished runs of another one must not be
    reused, as a run that trained more steps counts as finished for fewer. `write` records it."""
    record = out / name
    if record.is_file():
        was = json.loads(record.read_text())
        if was != budget:
            raise SystemExit(f"{out} holds runs of another budget ({was}, this plan {budget}); "
                             "fix: pass another --out, or remove that folder")
    elif write:
        out.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(budget))


def check_budget(plan: ProtocolPlan, write: bool) -> None:
    """The plan's budget against OUT/protocol.json (check_budget_record)."""
    check_budget_record(plan.out, "protocol.json", plan.budget(), write)


def train_all(plan: ProtocolPlan, log: Callable[[str], None] = print, known: Records | None = None,
              data: Path | None = None, arms: Sequence[str] = ARMS) -> None:
    """Train every missing run of `arms` (a seed's skill run before its hierarchy, whose budget it
    sets), but those whose record the report's data file holds (`known`, from_records). With `data`,
    each arm's seed is written to that data file as soon as its runs finish, so a campaign cut off
    keeps what it finished even where its run folders do not survive."""
    if unknown := [a for a in arms if a not in ARMS]:
        raise ValueError(f"arms {unknown} are not among the protocol's {list(ARMS)}")
    check_budget(plan, write=True)
    kept = from_records(plan, known)
    timings = plan.out / "timings.json"

    def keep(arm: str, seed: int) -> None:
        if data is not None:
            add_record(data, run_record(plan, arm, seed), plan.outcome, log)

    for seed in plan.seeds:
        for arm in (a for a in FLAT_ARMS if a in arms):
            if (arm, seed) in kept:
                log(f"reuse  {arm} seed {seed}: its record in the report's data file")
                continue
            train_run(plan.run_dir(arm, seed), plan.command(arm, seed), plan.arm_steps(arm, seed), timings, log)
            keep(arm, seed)
        if HIER not in arms:
            continue
        if (HIER, seed) in kept:
            log(f"reuse  {HIER} seed {seed}: its record in the report's data file")
            continue
        if plan.skills is not None:
            train_run(plan.skill_dir(seed), plan.skill_command(seed), plan.skills.steps, timings, log)
        train_run(plan.run_dir(HIER, seed), plan.command(HIER, seed), plan.arm_steps(HIER, seed), timings, log)
        keep(HIER, seed)


# ---- the statistics ----------------------------------------------------------------------------
def better_flat(finals: dict[str, Sequence[float]]) -> str:
    """The flat arm with the higher mean final outcome (`flat` on a tie): the one a claim must beat."""
    means = {arm: float(np.mean(finals[arm])) for arm in FLAT_ARMS}
    return SHAPED if means[SHAPED] > means[FLAT] else FLAT


def verdict(diff: CI) -> str:
    """'stands' only if the hierarchy minus the better flat arm has an interval above 0; 'not judged'
    where there is no interval (fewer than 2 seeds an arm)."""
    if not np.isfinite(diff[1]):
        return "not judged"
    return "stands" if diff[1] > 0 else "does not stand"


def reach_ci(per_seed: Sequence[float | None]) -> dict[str, Any]:
    """Steps-to-threshold over seeds: how many reached it, and the mean with a Student-t interval over
    those that did (no interval from fewer than 2)."""
    reached = [float(s) for s in per_seed if s is not None]
    if len(reached) >= 2:
        ci = t_ci(reached)
    else:
        ci = (reached[0], float("nan"), float("nan")) if reached else NAN
    return {"per_seed": list(per_seed), "reached": len(reached), "ci": ci}


def across(per_seed: Sequence[float]) -> CI:
    """The seeds' mean with its Student-t interval (hdppo.stats.t_ci), no interval (NaN bounds, which
    a report prints as the mean alone) from fewer than 2 seeds: t_ci gives one value zero width."""
    m, lo, hi = t_ci(per_seed)
    return (m, lo, hi) if np.isfinite(per_seed).sum() >= 2 else (m, float("nan"), float("nan"))


def seeds_t_ci(per_seed: Sequence[float], rate: bool = False) -> CI:
    """The seeds' mean with its Student-t interval (across); a rate's (an outcome that is 0 or 1 in
    every episode) clipped to [0, 1], where the t interval of few seeds can reach past."""
    m, lo, hi = across(per_seed)
    return (m, max(lo, 0.0), min(hi, 1.0)) if rate and np.isfinite(m) else (m, lo, hi)


def paired_ci(a: Sequence[float], b: Sequence[float]) -> CI:
    """mean(a - b) over paired values (one pair per seed) with a Student-t interval."""
    return across([x - y for x, y in zip(a, b)])


def seed_points(plan: ProtocolPlan, arm: str, seed: int, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The (env frame, outcome) training curve of one arm's seed; the hierarchy's skill run first,
    its own run after it, shifted by the skill run's frames."""
    x, y = outcome_curve(plan.run_dir(arm, seed), key)
    if arm != HIER or plan.skills is None:
        return x, y
    sx, sy = outcome_curve(plan.skill_dir(seed), key)
    return np.concatenate([sx, x + plan.skill_frames(seed)]), np.concatenate([sy, y])


def on_grid(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """A curve interpolated onto `grid`, NaN before its first point (all NaN without points)."""
    if not len(x):
        return np.full(len(grid), np.nan)
    c = np.interp(grid, x, y)
    c[grid < x[0]] = np.nan
    return c


def seeds_mean(curves: list[np.ndarray]) -> np.ndarray:
    stack = np.stack(curves)
    seen = np.isfinite(stack).any(axis=0)
    out = np.full(stack.shape[1], np.nan)
    out[seen] = np.nanmean(stack[:, seen], axis=0)
    return out


def arm_commands(plan: ProtocolPlan, arm: str, seed: int) -> list[list[str]]:
    """The `hdppo train` commands of one arm's seed: the hierarchy's skill run, then its own run."""
    if arm == HIER and plan.skills is not None:
        return [plan.skill_command(seed), plan.command(HIER, seed)]
    return [plan.command(arm, seed)]


def frames(plan: ProtocolPlan, arm: str, seed: int) -> int:
    """The env frames the arm's seed trained, its skill run's included."""
    state = json.loads((plan.run_dir(arm, seed) / "state.json").read_text())
    return int(state.get("env_steps", 0)) + (plan.skill_frames(seed) if arm == HIER else 0)


def seed_minutes(plan: ProtocolPlan, arm: str, seed: int) -> float | None:
    """Training wall minutes of one arm's seed (its skill run's included; OUT/timings.json, as
    examples.studies.evidence.train_run writes it), None where not timed here."""
    timings = plan.out / "timings.json"
    times = json.loads(timings.read_text()) if timings.is_file() else {}
    names = [r.name for r in seed_runs(plan, arm, seed)]
    return sum(times[n] for n in names) / 60.0 if all(n in times for n in names) else None


def seed_runs(plan: ProtocolPlan, arm: str, seed: int) -> list[Path]:
    """The run folders of one arm's seed in training order: the hierarchy's skill run, then its own run."""
    return ([plan.skill_dir(seed)] if arm == HIER and plan.skills is not None else []) + [plan.run_dir(arm, seed)]


# ---- the diagnostics ---------------------------------------------------------------------------
def top_layer(run: Path) -> tuple[str, int | None]:
    """The run's top layer, and the size of its action (goal) space when Discrete (else None)."""
    import gymnasium as gym

    from hdppo.runfolder import load_run_config, resolve_scenario
    from hdppo.team.scenario import load_scenario
    config = load_run_config(run)
    scenario = load_scenario(resolve_scenario(run, config))
    layers = scenario.build_layers(scenario.make_config(config["scenario_overrides"]))
    space = layers[0].goal_space
    return layers[0].name, int(space.n) if isinstance(space, gym.spaces.Discrete) else None


def late_entropy(run: Path, layer: str) -> float:
    """The layer's policy entropy (metrics/LAYER.csv `entropy`) averaged over the last tenth of its
    logged env steps (at least its last row); NaN if it logged none (e.g. no update yet)."""
    if not scope_file(run, layer).is_file():
        return float("nan")
    rows = [r for r in read_csv(run, layer) if np.isfinite(r.get("entropy", np.nan))]
    if not rows:
        return float("nan")
    last = rows[-1]["step"]
    late = [r["entropy"] for r in rows if r["step"] >= (1 - LATE) * last] or [rows[-1]["entropy"]]
    return float(np.mean(late))


# ---- the seeds' records -----------------------------------------------------------------------
# What the report needs from one arm's seed, taken from its run folders once (the final evals played
# and cached there) and kept in the report's data file (NAME-runs.json beside NAME.md), so the report
# can be rewritten, and a campaign continued seed by seed, after the run folders are gone.
Records = dict[tuple[str, int], dict[str, Any]]
CONFIG_KEYS = ("train", "scenario_config", "layers")    # of config.json: what `same_run.changed_from` compares
CURVE_POINTS = 400      # a record's training curve keeps at most this many points (the report's grid has 101)


def thin(x: np.ndarray, y: np.ndarray, n: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most `n` points of a curve, evenly spaced by index, its first and last kept."""
    if len(x) <= n:
        return x, y
    idx = np.unique(np.linspace(0, len(x) - 1, n).round().astype(int))
    return x[idx], y[idx]


def run_record(plan: ProtocolPlan, arm: str, seed: int, eval_seed: int = EVAL_SEED) -> dict[str, Any]:
    """One arm's seed from its finished run folders: the final eval (played once, cached in the run),
    the training curve, frames, minutes, the commands, configs and provenance of its runs, and for
    the hierarchy the diagnostics (commander entropy, the eval with a uniformly random commander)."""
    run = plan.run_dir(arm, seed)
    rec = base_record(plan, arm, seed, seed_runs(plan, arm, seed), arm_commands(plan, arm, seed),
                      seed_points(plan, arm, seed, plan.outcome), plan.budget(), eval_seed,
                      frames=frames(plan, arm, seed), minutes=seed_minutes(plan, arm, seed))
    if arm == HIER:
        rec.update(commander_record(run, plan.eval_episodes, eval_seed + seed, plan.outcome))
    return rec


def commander_record(run: Path, episodes: int, eval_seed: int, outcome: str) -> dict[str, Any]:
    """What `diagnose` needs of a hierarchy's run beyond its final eval: its top layer and goal count,
    the final `outcome` with that layer uniformly random (played once, cached in the run) and the
    layer's late entropy."""
    top, n_goals = top_layer(run)
    uniform = final_episodes(run, episodes, eval_seed, uniform=(top,))
    return {"top": top, "n_goals": n_goals, "random_top": _mean(uniform, outcome), "entropy": late_entropy(run, top)}


def base_record(plan: Any, arm: str, seed: int, runs: list[Path], commands: list[list[str]],
                curve: tuple[np.ndarray, np.ndarray], budget: Any, eval_seed: int = EVAL_SEED,
                **more: Any) -> dict[str, Any]:
    """What a study's record of one arm's seed holds (this protocol's, examples/evidence/transfer.py's):
    the final eval of its last run (`plan.eval_episodes` episodes, played once and cached in the run:
    the outcome, team return, `plan.also` keys, goal counts per layer), the training curve (thinned),
    the commands, configs and provenance of its runs (in training order), and the `more` fields."""
    from hdppo.runfolder import load_run_config
    goals: dict[str, Any] = {}
    eps = final_episodes(runs[-1], plan.eval_episodes, eval_seed + seed, goal_counts=goals,
                         keys=(plan.outcome, *plan.also))
    x, y = thin(*curve)
    return {"arm": arm, "seed": seed, "budget": budget, "eval_episodes": plan.eval_episodes,
            "eval_seed": eval_seed + seed, "commands": [shlex.join(c) for c in commands],
            "configs": [{k: cfg.get(k) for k in CONFIG_KEYS} for cfg in map(load_run_config, runs)],
            "provenance": [provenance.read(r) for r in runs], **more, "curve": [x.tolist(), y.tolist()],
            "final": _mean(eps, plan.outcome), "team_return": _mean(eps, "team_return"),
            "also": {k: _mean(eps, k) for k in plan.also}, "goals": goals}


def _mean(episodes: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([float(e.get(key, np.nan)) for e in episodes]))


def fits(plan: Any, record: dict[str, Any] | None, arm: str, seed: int, eval_seed: int = EVAL_SEED,
         budget: Any = None) -> bool:
    """Whether a data file's record is of this plan's arm and seed at its budget (`budget`, by default
    ProtocolPlan.budget()), eval and keys (whether the code still makes it is stale_records')."""
    return (record is not None and record["arm"] == arm and record["seed"] == seed
            and record["budget"] == (plan.budget() if budget is None else budget)
            and record["eval_episodes"] == plan.eval_episodes
            and record["eval_seed"] == eval_seed + seed and set(plan.also) <= set(record["also"]))


def from_records(plan: Any, known: Records | None, eval_seed: int = EVAL_SEED, *, arms: Sequence[str] = ARMS,
                 budget: Any = None, here: Callable[[str, int], bool] | None = None) -> Records:
    """The plan's seeds to take from the data file: a fitting record there (fits, at `budget`), and the
    seed's own run not finished here (`here(arm, seed)`; a finished run folder is always read, and its
    record rewritten)."""
    if not known:
        return {}
    if here is None:
        def here(arm: str, s: int) -> bool:
            return finished(plan.run_dir(arm, s), plan.arm_steps(arm, s))
    return {(arm, s): known[arm, s] for arm in arms for s in plan.seeds
            if fits(plan, known.get((arm, s)), arm, s, eval_seed, budget) and not here(arm, s)}


def stale_records(plan: Any, known: Records | None, kept_by: Callable[[Any, Records | None], Records] | None = None,
                  commands_of: Callable[[Any, str, int], list[list[str]]] | None = None) -> dict[str, list[str]]:
    """'ARM seed S' -> the settings where a data-file record this plan would use (`kept_by`, from_records
    by default) differs from what its runs' commands (`commands_of`, arm_commands by default) make
    with this code now (examples.studies.same_run.changed_from)."""
    from examples.studies.same_run import changed_from
    stale = {}
    for (arm, seed), rec in (kept_by or from_records)(plan, known).items():
        commands = (commands_of or arm_commands)(plan, arm, seed)
        # as many runs as the plan's (a skill stage added or removed changes the budget: fits refuses it)
        changes = [c for cfg, cmd in zip(rec["configs"], commands) for c in changed_from(cfg, cmd[2:])]
        if changes:
            stale[f"{arm} seed {seed}"] = changes
    return stale


def read_records(path: Path) -> Records:
    """A report's data file, by (arm, seed); empty if there is none."""
    if not path.is_file():
        return {}
    return {(r["arm"], int(r["seed"])): r for r in json.loads(path.read_text())}


def write_records(path: Path, records: list[dict[str, Any]], known: Records, order: Sequence[str] = ARMS) -> None:
    """The data file: these records, and the known ones of other arms and seeds (a report on fewer
    seeds keeps the rest), by arm (in `order`) and seed."""
    made = {(r["arm"], r["seed"]) for r in records}
    kept = [r for key, r in known.items() if key not in made]
    arms = list(order)
    rows = sorted(records + kept, key=lambda r: (arms.index(r["arm"]) if r["arm"] in arms else len(arms), r["seed"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1, default=float) + "\n")


def add_record(path: Path, record: dict[str, Any], outcome: str, log: Callable[[str], None] = print,
               order: Sequence[str] = ARMS) -> None:
    """Write one arm's seed into the data file at `path` as soon as its runs finish, keeping the rest."""
    write_records(path, [record], read_records(path), order)
    log(f"record {record['arm']} seed {record['seed']}: final {outcome} {record['final']:.3f}, in {path}")


def diagnose(records: list[dict[str, Any]], rate: bool) -> dict[str, Any]:
    """Why the hierarchy does as it does, from its seeds' records: goal success per layer (the final
    eval's goal counts of each seed), its commander's late entropy, and its final team with a
    uniformly random commander."""
    success: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for rec in records:
        for layer, by_goal in rec["goals"].items():
            n, ok = by_goal["all"]
            success.setdefault(layer, []).append(ok / n if n else float("nan"))
            total = counts.setdefault(layer, [0, 0])
            total[0], total[1] = total[0] + n, total[1] + ok
    top, n_goals = records[0]["top"], records[0]["n_goals"]
    finals = [rec["final"] for rec in records]
    random_top = [rec["random_top"] for rec in records]
    entropy = [rec["entropy"] for rec in records]
    return {"top": top, "n_goals": n_goals,
            "goal_success": {layer: {"per_seed": v, "ci": seeds_t_ci(v, rate=True), "goals": counts[layer]}
                             for layer, v in success.items()},
            "entropy": {"per_seed": entropy, "ci": across(entropy),
                        "uniform": float(np.log(n_goals)) if n_goals else None},
            "random_top": {"per_seed": random_top, "ci": seeds_t_ci(random_top, rate),
                           "trained_minus_random": paired_ci(finals, random_top)}}


def summarize(plan: ProtocolPlan, eval_seed: int = EVAL_SEED, known: Records | None = None) -> dict[str, Any]:
    """Per arm the seeds' final eval and its t interval, the better flat arm, the hierarchy's
    difference to it and the verdict, steps-to-threshold, minutes and frames per run, diagnostics;
    from each seed's record (its run folders', or the report's data file's where `known` holds
    one that fits and the folders are not finished): `records`, the data file's content."""
    kept = from_records(plan, known, eval_seed)        # a record where it fits and the run is not finished here
    records = {(arm, s): kept.get((arm, s)) or run_record(plan, arm, s, eval_seed) for arm in ARMS for s in plan.seeds}
    trained = {arm: [records[arm, s]["frames"] for s in plan.seeds] for arm in ARMS}
    # the curves up to the most frames a run trained (a run ends on a whole rollout, past its budget)
    grid = np.linspace(0, max(plan.steps, *(f for fs in trained.values() for f in fs)), 101)
    arms: dict[str, Any] = {}
    for arm in ARMS:
        recs = [records[arm, s] for s in plan.seeds]
        finals = [r["final"] for r in recs]
        curves = [on_grid(np.asarray(r["curve"][0], float), np.asarray(r["curve"][1], float), grid) for r in recs]
        curve = seeds_mean(curves)
        arms[arm] = {"args": plan.args(arm), "per_seed": finals, "ci": seeds_t_ci(finals, plan.rate),
                     "team_return": across([r["team_return"] for r in recs]),
                     "also": {k: across([r["also"][k] for r in recs]) for k in plan.also},
                     "curve": curve.tolist(), "curve_final": final_value(curve),
                     "seed_curves": [c.tolist() for c in curves], "frames": trained[arm],
                     "minutes": [r["minutes"] for r in recs],
                     "commands": [c for r in recs for c in r["commands"]], "goals": [r["goals"] for r in recs]}
    best = better_flat({a: arms[a]["per_seed"] for a in FLAT_ARMS})
    diff = diff_ci(arms[HIER]["per_seed"], arms[best]["per_seed"])
    best_mean = arms[best]["ci"][0]
    out: dict[str, Any] = {"arms": arms, "grid": grid.tolist(), "better_flat": best, "diff": diff,
                           "ratio": arms[HIER]["ci"][0] / best_mean if best_mean > 0 else None,
                           "verdict": verdict(diff), "budget": plan.budget()}
    threshold, source = plan.threshold, "given"
    if threshold is None:
        start = min(first_value(np.asarray(arms[a]["curve"])) for a in ARMS)
        target = arms[best]["curve_final"]
        improved = bool(np.isfinite(target) and target > start)
        threshold, source = ((target, "better flat arm's final") if improved
                             else (None, "not improved" if np.isfinite(target) else "no curve"))
    out["threshold"], out["threshold_source"] = threshold, source
    for arm in ARMS:
        arms[arm]["to_threshold"] = None if threshold is None else reach_ci(
            [steps_to_reach(grid, np.asarray(c), threshold) for c in arms[arm]["seed_curves"]])
    out["why"] = diagnose([records[HIER, s] for s in plan.seeds], plan.rate)
    out["records"] = list(records.values())
    return out


# ---- the report --------------------------------------------------------------------------------
def _ci(ci: Sequence[float], digits: int = 3) -> str:
    m, lo, hi = ci
    if not np.isfinite(m):
        return "-"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _per(values: Sequence[float], digits: int = 2) -> str:
    """Per-seed values, '-' where a seed has none."""
    return ", ".join(f"{x:.{digits}f}" if np.isfinite(x) else "-" for x in values)


def _k(steps: float) -> str:
    """Frames in thousands from 10k on (either sign: an interval's lower bound can be negative)."""
    return f"{steps / 1000:,.0f}k" if abs(steps) >= 10_000 else f"{steps:,.0f}"


def _steps_ci(ci: Sequence[float]) -> str:
    m, lo, hi = ci
    if not np.isfinite(m):
        return "-"
    return _k(m) + (f" [{_k(lo)}, {_k(hi)}]" if np.isfinite(lo) else " (one seed: no interval)")


def _minutes(values: list[float | None]) -> str:
    timed = [v for v in values if v is not None]
    if not timed:
        return "-"
    med = f"{float(np.median(timed)):.1f}"
    return med + (f" ({min(timed):.1f}-{max(timed):.1f})" if len(timed) > 1 else "") + (
        f", {len(timed)} of {len(values)} timed" if len(timed) < len(values) else "")


def _seeds_df(n: int) -> str:
    """'5 seeds, 4 degrees of freedom'; '1 seed, 0 degrees of freedom'; '2 seeds, 1 degree of freedom'."""
    return f"{n} seed{'s' if n != 1 else ''}, {n - 1} degree{'s' if n != 2 else ''} of freedom"


def _frames(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def markdown(plan: ProtocolPlan, summary: dict[str, Any], png_name: str, command: str,
             made: dict[str, Any] | None = None) -> str:
    arms, best, o = summary["arms"], summary["better_flat"], plan.outcome
    n = len(plan.seeds)
    sk = plan.skills
    budget = f"**{plan.steps:,} env frames per run** in every arm"
    if sk is not None:
        frozen = " (the skills trained on)" if sk.trains_skills else " (the skills frozen)"
        budget += (f"; the hierarchy's include its skill run: {sk.steps:,} frames of `hdppo train --skills` (its "
                   f"units learn to reach the goals of an untrained commander), then the rest in its own run, "
                   f"`--layer {sk.then} --load {sk.layer}=SKILLRUN`{frozen}")
    lines = [f"# Evidence: {plan.scenario} ({plan.name or plan.scenario}), the hierarchy against the better flat arm",
             "", f"Reproduce with `{command}` ({(3 + bool(sk)) * (n + len(summary.get('pending', [])))} training runs; "
             "finished ones are reused).",
             *incomplete(summary.get("pending", []), plan.seeds, "The protocol's claim needs all of them."),
             "", f"The protocol of [the evidence pages](README.md#the-protocol): {budget}"
             + (f"; every run with `{' '.join(plan.common)}`" if plan.common else "") + f"; seeds {plan.seeds}. "
             f"Each final team is played for {plan.eval_episodes} fresh episodes (`hdppo.runtime.evaluate.play`, "
             f"sampled actions, eval seed {EVAL_SEED} + the seed). Intervals are 95% Student-t intervals across the "
             f"seeds' means ({_seeds_df(n)}"
             + ("; a rate's clipped to [0, 1]" if plan.rate else "") + "); the difference between two arms is a "
             "Welch interval. A run ends on a whole rollout, so it "
             "may pass its budget by part of one: the frames column gives what the runs trained.", "",
             f"| arm | `hdppo train` arguments | env frames per run | final {o} (eval) | per seed | team return | "
             + "".join(f"{k} | " for k in plan.also) + "training min per run (median, range) |",
             "|---|---|---:|---|---|---|" + "---|" * len(plan.also) + "---:|"]
    for arm in ARMS:
        s = arms[arm]
        per = _per(s["per_seed"])
        mark = " (the better flat arm)" if arm == best else ""
        lines.append(f"| **{arm}**: {TITLES[arm]}{mark} | `{' '.join(s['args']) or 'defaults'}` | "
                     f"{_frames(s['frames'])} | {_ci(s['ci'])} | {per} | {_ci(s['team_return'])} | "
                     + "".join(f"{_ci(s['also'][k])} | " for k in plan.also) + f"{_minutes(s['minutes'])} |")
    d, v = summary["diff"], summary["verdict"]
    head = verdict_head(plan.seeds, summary.get("pending", []))
    ratio = summary["ratio"]
    other = arms[FLAT if best == SHAPED else SHAPED]["ci"][0]
    tie = "; a tie, so the plain flat arm is taken" if other == arms[best]["ci"][0] else ""
    lines += ["", f"The better flat arm is **{best}** (mean final {o} {arms[best]['ci'][0]:.3f} against "
                  f"{other:.3f}{tie}). The hierarchy minus {best}: "
                  f"**{_ci(d)}** (Welch, 95%)" + (f"; the ratio of the means is {ratio:.2f}" if ratio is not None
                                                 else "") + ".", ""]
    if v == "stands":
        lines.append(f"**{head}: the claim stands.** The hierarchy's final {o} is above the better flat arm's, "
                     f"the interval of the difference above 0.")
    elif v == "does not stand":
        worse = d[2] < 0
        lines.append(f"**{head}: the claim does not stand.** The hierarchy's final {o} is "
                     + ("below the better flat arm's (the interval of the difference below 0): the hierarchy "
                        "loses." if worse else "not shown above the better flat arm's (the interval of the "
                                               "difference holds 0): a tie at this budget and seed count."))
    else:
        lines.append(f"**{head}: not judged**: the difference has no interval (fewer than 2 seeds an arm).")
    lines += ["", f"![{o} curves]({png_name})", ""]
    th = summary["threshold"]
    if th is None and summary["threshold_source"] == "no curve":
        lines.append(f"**Steps to threshold:** none; the better flat arm's training curve holds no point (a point "
                     f"averages the last 200 episodes and needs {MIN_EPISODES} finished ones: the budget is too small "
                     f"for a curve), so there is no threshold to reach.")
    elif th is None:
        lines.append(f"**Steps to threshold:** none; the better flat arm's {o} did not rise above where the arms "
                     f"started, so there is no threshold worth reaching.")
    else:
        what = "the better flat arm's final training value" if summary["threshold_source"] != "given" else "given"
        since = "; the hierarchy's from its skill run on" if sk else ""
        lines += [f"**Steps to threshold:** env frames until each seed's own training curve ({o} over the last 200 "
                  f"episodes{since}) first reaches {th:.3f} ({what}); mean and "
                  f"95% t interval over the seeds that reached it:", "",
                  "| arm | seeds that reached it | frames (mean, 95% CI) | per seed |", "|---|---|---|---|"]
        for arm in ARMS:
            st = arms[arm]["to_threshold"]
            per = ", ".join("-" if x is None else _k(x) for x in st["per_seed"])
            lines.append(f"| {arm} | {st['reached']} of {n} | {_steps_ci(st['ci'])} | {per} |")
    lines += ["", *why_lines(plan, summary), ""]
    if plan.notes:
        lines += ["## Notes", ""] + [x for note in plan.notes for x in (note, "")]
    lines += ["Runs (exact commands):", ""]
    for arm in ARMS:
        lines += [f"- `{c}`" for c in arms[arm]["commands"]]
    lines += ["", "Made by (each run's `provenance.json`, and the code that wrote this report):", ""]
    made_by = {provenance.describe(p) for rec in summary["records"] for p in rec["provenance"]}
    lines += [f"- runs: {m}" for m in sorted(made_by)]
    lines.append(f"- report: {provenance.describe(made or provenance.provenance())}")
    return "\n".join(lines) + "\n"


def verdict_head(seeds: Sequence[int], pending: Sequence[int]) -> str:
    """A verdict's head: "Verdict", or "Verdict so far (N of M seeds)" on a report of part of its
    command's seeds, whose verdict the seeds still to come may turn."""
    return f"Verdict so far ({len(seeds)} of {len(seeds) + len(pending)} seeds)" if pending else "Verdict"


def incomplete(pending: Sequence[int], seeds: Sequence[int], needs: str) -> list[str]:
    """The lines of a report's note on the seeds of its command not finished yet (none: no lines)."""
    if not pending:
        return []
    return ["", f"> **Incomplete**: seeds {list(pending)} of this command are not finished; this report covers seeds "
                f"{list(seeds)}, where every arm is. {needs}"]


def why_lines(plan: ProtocolPlan, summary: dict[str, Any]) -> list[str]:
    """The diagnostics section: goal success per layer, commander entropy, the random commander."""
    head = ("Why the hierarchy does not win here" if summary["verdict"] != "stands"
            else "What the hierarchy's parts do")
    return diagnostics_lines(summary["why"], plan.outcome, summary["arms"][HIER]["ci"], head, "the hierarchy")


def diagnostics_lines(why: dict[str, Any], o: str, trained: CI, head: str, whose: str) -> list[str]:
    """A `diagnose` result as a section headed `head`: goal success per layer, the commander's late
    entropy, and the final `o` with a uniformly random commander against the trained one's (`trained`)."""
    top = why["top"]
    lines = [f"## {head}", "",
             f"From {whose}'s finished runs, per seed, then the mean with a 95% t interval across the seeds.",
             "", "| measure | mean [95% CI] | per seed | read against |", "|---|---|---|---|"]
    for layer, g in why["goal_success"].items():
        n, ok = g["goals"]
        lines.append(f"| goal success of `{layer}` (eval: share of the goals it received that it reached) | "
                     f"{_ci(g['ci'])} | {_per(g['per_seed'], 3)} | {ok:,} of {n:,} goals "
                     f"over all seeds |")
    e = why["entropy"]
    ref = f"uniform over its {why['n_goals']} goals: ln {why['n_goals']} = {e['uniform']:.3f}" if e["uniform"] else "-"
    lines.append(f"| entropy of the commander `{top}`, last tenth of its training (metrics/{top}.csv) | "
                 f"{_ci(e['ci'])} | {_per(e['per_seed'], 3)} | {ref} |")
    r = why["random_top"]
    lines.append(f"| final {o} with `{top}` uniformly random (`hdppo eval --uniform {top}`) | {_ci(r['ci'])} | "
                 f"{_per(r['per_seed'])} | the trained commander: {_ci(trained)} |")
    lines.append(f"| trained minus random commander (paired by seed) | {_ci(r['trained_minus_random'])} | | |")
    lines.append("")
    if not why["goal_success"]:
        lines.append("The scenario reports no goal success (no layer has a `goal_success` test).")
    dm, dlo, dhi = r["trained_minus_random"]
    if len(r["per_seed"]) < 2:
        lines.append("- One seed: the trained and the random commander have no interval to compare by.")
    elif np.isfinite(dlo):
        if dlo > 0:
            lines.append(f"- The trained commander's goals add {dm:.3f} [{dlo:.3f}, {dhi:.3f}] {o} over random goals: "
                         "its choices matter.")
        elif dhi < 0:
            lines.append(f"- Random goals do better than the trained commander's ({-dm:.3f} more {o}): "
                         "its choices hurt.")
        else:
            lines.append("- The trained commander is not shown to do better than random goals (the paired "
                         "difference's interval holds 0): whatever the team achieves, its choices of goals are "
                         "not shown to be the reason.")
    if e["uniform"] and np.isfinite(e["ci"][0]):
        lines.append(f"- The commander's late entropy is {e['ci'][0] / e['uniform']:.2f} of the uniform policy's"
                     + (": it still chooses almost at random." if e["ci"][0] > 0.9 * e["uniform"] else "."))
    return lines


def plot(plan: ProtocolPlan, summary: dict[str, Any], png: Path) -> Path:
    """Left: the outcome while training, per arm (seeds thin, their mean bold; the hierarchy's from its
    skill run on). Right: the final eval per arm with its t interval, and the random commander's."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bar) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    grid = np.asarray(summary["grid"])
    for i, arm in enumerate(ARMS):
        for rec in (r for r in summary["records"] if r["arm"] == arm):
            ax.plot(*rec["curve"], color=f"C{i}", alpha=0.3, linewidth=0.8)
        ax.plot(grid, summary["arms"][arm]["curve"], color=f"C{i}", linewidth=2,
                label=f"{arm} ({len(plan.seeds)} seeds)")
    if plan.skills is not None:
        ax.axvline(plan.skills.steps, color="C2", linestyle=":", linewidth=1, label="hier: skills end")
    if summary["threshold"] is not None:
        ax.axhline(summary["threshold"], color="grey", linestyle="--", linewidth=0.8, label="threshold")
    ax.set_xlim(0, grid[-1])
    if not np.isfinite(np.asarray([summary["arms"][a]["curve"] for a in ARMS], float)).any():
        ax.text(0.5, 0.5, f"no curve point yet\n(a point needs {MIN_EPISODES} finished episodes)",
                transform=ax.transAxes, ha="center", va="center", color="grey")
    ax.set_xlabel("env frames" + (" (the hierarchy's skill run included)" if plan.skills is not None else ""))
    ax.set_ylabel(f"{plan.outcome} (last 200 episodes)")
    ax.set_title(f"{plan.name or plan.scenario}: {plan.outcome} while training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    bars = [(arm, summary["arms"][arm]["ci"]) for arm in ARMS]
    bars.append((f"hier, random {summary['why']['top']}", summary["why"]["random_top"]["ci"]))
    for i, (_, (m, lo, hi)) in enumerate(bars):
        err = [[m - lo], [hi - m]] if np.isfinite(lo) else None
        bar.bar(i, m, color=f"C{min(i, 2)}", alpha=1.0 if i < 3 else 0.45, yerr=err, capsize=4)
    bar.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=15, fontsize=8)
    bar.set_ylabel(f"final {plan.outcome} (eval, 95% t CI)")
    bar.set_title(f"{verdict_head(plan.seeds, summary.get('pending', [])).lower()}: {summary['verdict']}")
    bar.grid(alpha=0.3, axis="y")
    return save_png(fig, png)


# ---- the command line --------------------------------------------------------------------------
def parser(plan: ProtocolPlan, description: str | None = None,
           out_help: str = "folder of the runs (finished runs are reused)") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description or f"{plan.scenario}: the evidence protocol's three arms")
    p.add_argument("--steps", type=int, default=plan.steps, help="env frames per run (the skill run's included)")
    p.add_argument("--skill-steps", type=int, default=plan.skills.steps if plan.skills else 0,
                   help="env frames of the hierarchy's skill run, counted in its budget (0: none)"
                   if plan.skills else argparse.SUPPRESS)
    p.add_argument("--seeds", type=int, nargs="+", default=plan.seeds)
    p.add_argument("--out", default=str(plan.out), help=out_help)
    p.add_argument("--episodes", type=int, default=plan.eval_episodes, help="eval episodes per run")
    p.add_argument("--threshold", type=float, default=plan.threshold,
                   help=f"{plan.outcome} of steps-to-threshold (default: the better flat arm's final)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a further `hdppo train` key of every run (repeatable), e.g. --set workers=1")
    p.add_argument("--write", metavar="DIR", help="write DIR/NAME.md and DIR/NAME.png (default: into --out)")
    p.add_argument("--tag", default="", help="name the report NAME-TAG.md/.png (e.g. a shorter budget)")
    p.add_argument("--report-only", action="store_true", help="skip training; report the runs in --out")
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS),
                   help="train only these arms' missing runs (each kept in the data file as it finishes), then "
                        "report the seeds whose three arms are all done: a long campaign a share at a time")
    return p


def reproduce(script: str, given: Sequence[str]) -> str:
    """The report's command: `python SCRIPT` with the given arguments, less --report-only and --arms
    (with its values), which choose what one session trains, not what the report shows."""
    kept: list[str] = []
    skipping = False
    for a in given:
        if skipping and not a.startswith("-"):
            continue
        skipping = a == "--arms"
        if not (skipping or a == "--report-only" or a.startswith("--arms=")):
            kept.append(a)
    return shlex.join(["python", script, *kept])


def configure(plan: ProtocolPlan, args: argparse.Namespace) -> ProtocolPlan:
    """The plan with the command line's budget, seeds, folder and settings (the given plan unchanged)."""
    skills = None
    if plan.skills is None and args.skill_steps:
        raise SystemExit(f"--skill-steps {args.skill_steps}: this plan's hierarchy has no skill stage (it trains "
                         f"from scratch on the whole --steps); drop --skill-steps")
    if plan.skills is not None and args.skill_steps:
        skills = dataclasses.replace(plan.skills, steps=args.skill_steps)
    for item in args.set:
        if "=" not in item:
            raise SystemExit(f"--set {item!r}: write KEY=VALUE, e.g. --set workers=1")
    keys = {item.partition("=")[0] for item in args.set}
    common = [a for a in plan.common if a.partition("=")[0] not in keys] + list(args.set)   # --set replaces a key
    try:
        return dataclasses.replace(plan, steps=args.steps, seeds=list(args.seeds), out=Path(args.out),
                                   eval_episodes=args.episodes, threshold=args.threshold, skills=skills,
                                   common=common)
    except ValueError as exc:
        raise SystemExit(f"--steps {args.steps} --skill-steps {args.skill_steps}: {exc}") from None


def data_file(plan: Any, args: argparse.Namespace) -> Path:
    """The report's data file, NAME-runs.json beside NAME.md (--write, else the runs' folder)."""
    base = plan.name or plan.scenario
    return (Path(args.write) if args.write else plan.out) / f"{base}{'-' + args.tag if args.tag else ''}-runs.json"


def run(plan: ProtocolPlan, args: argparse.Namespace, command: str,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train what is missing (unless --report-only; seeds whose record the data file holds are not
    trained again), summarize, write NAME.md, NAME.png, NAME-runs.json and OUT/summary.json. With
    --report-only, the seeds of which every arm is done are reported and the rest named as pending.
    With --arms, only those arms' missing runs are trained, then the report is --report-only's; where
    no seed has all three arms yet, no report is written and the summary's `pending` names the seeds."""
    arms = list(getattr(args, "arms", ARMS))
    if set(arms) != set(ARMS) and not args.report_only:
        data = data_file(plan, args)
        known = read_records(data)
        check_runs(plan, known=known)
        train_all(plan, log, known, data, arms)
        known = read_records(data)
        if not any(all(done(plan, a, s, known) for a in ARMS) for s in plan.seeds):
            log(f"trained {' '.join(arms)} of seeds {plan.seeds}, kept in {data}; no report yet: no seed has all "
                f"three arms (the rest: the same command with --arms "
                f"{' '.join(a for a in ARMS if a not in arms)}, or without --arms)")
            return {"pending": list(plan.seeds), "records": list(known.values())}
        args = argparse.Namespace(**{**vars(args), "report_only": True})
    return campaign(plan, args, command, ARMS, done=done, check=lambda p, known: check_runs(p, known=known),
                    train=train_all, summarize=lambda p, known: summarize(p, known=known), plot=plot,
                    markdown=markdown, log=log)


NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def campaign(plan: Any, args: argparse.Namespace, command: str, arms: Sequence[str], *,
             done: Callable[[Any, str, int, Records], bool], check: Callable[[Any, Records], None],
             train: Callable[[Any, Callable[[str], None], Records, Path], None],
             summarize: Callable[[Any, Records], dict[str, Any]], plot: Callable, markdown: Callable,
             log: Callable[[str], None] = print) -> dict[str, Any]:
    """examples.studies.evidence.report over the report's data file (data_file: each seed's `arms`
    kept as records), the plan's own steps passed in: check(plan, known records) refuses stale runs
    and records, train(plan, log, known, data file) trains what neither a finished run nor a fitting
    record holds, writing each arm's seed to the data file as it finishes; summarize(plan, known)
    gives the summary with its `records`, which the data file then holds (with those of other seeds).
    With --report-only, the seeds of which every arm is done (done(plan, arm, seed, known)) are
    reported and the rest named as the summary's `pending`; with none done, a SystemExit."""
    data = data_file(plan, args)
    known = read_records(data)
    pending: list[int] = []
    if args.report_only:
        ready = [s for s in plan.seeds if all(done(plan, arm, s, known) for arm in arms)]
        if not ready:
            first = plan.seeds[0]
            lacks = ", ".join(str(plan.run_dir(a, first)) for a in arms if not done(plan, a, first, known))
            raise SystemExit(f"--report-only: no seed of {plan.seeds} has all {NUMBERS.get(len(arms), len(arms))} "
                             f"arms finished in {plan.out} or recorded in {data} (seed {first} lacks {lacks}); "
                             "fix: run the same command without --report-only")
        pending = [s for s in plan.seeds if s not in ready]
        plan = dataclasses.replace(plan, seeds=ready)
        plan.out.mkdir(parents=True, exist_ok=True)       # OUT/summary.json, where the run folders are gone
    summary = report(plan, args, command, plan.name or plan.scenario, check=lambda: check(plan, known),
                     train=lambda p, lg: train(p, lg, known, data),
                     summarize=lambda p: {**summarize(p, known), "pending": pending},
                     plot=plot, markdown=markdown, log=log)
    write_records(data, summary["records"], known, arms)
    return summary


def done(plan: ProtocolPlan, arm: str, seed: int, known: Records) -> bool:
    """Whether the arm's seed is recorded in the data file (and fits the plan) or its run is finished."""
    return (arm, seed) in from_records(plan, known) or finished(plan.run_dir(arm, seed), plan.arm_steps(arm, seed))


def check_runs(plan: Any, budget: Callable[..., None] | None = None, known: Records | None = None,
               stale_of: Callable[[Any, Records | None], dict[str, list[str]]] | None = None) -> None:
    """The plan's folder holds runs of its budget (`budget`, check_budget by default), and its finished
    runs, and the data-file records it would use in place of runs (`known`; `stale_of`, stale_records
    by default, names those made otherwise), are what their commands make."""
    (budget or check_budget)(plan, write=False)
    refuse_stale([job for seed in plan.seeds for job in plan.jobs(seed)])
    if stale := (stale_of or stale_records)(plan, known):
        lines = "\n".join(f"  {what}: {'; '.join(changes)}" for what, changes in stale.items())
        raise SystemExit(f"these runs of the report's data file were made with settings their commands no longer "
                         f"give:\n{lines}\nfix: take their records out of the data file to train them again with "
                         "this code, or put the runs' values in the plan's arguments (e.g. `epochs=4` where a "
                         "default changed) so the report says how they were made")


def main_each(plan_of: Callable[[str], ProtocolPlan], choices: Sequence[str], flag: str, script: str,
              description: str, argv: list[str] | None = None,
              options: Sequence[tuple[str, dict[str, Any]]] = ()) -> dict[str, dict]:
    """The protocol's command line for a script with one plan per choice (a map, a size), picked by
    `--FLAG` (default: all); `--out DIR` holds one subfolder per choice, the plan's own folder name.
    `options` are the script's own flags (name, add_argument keywords), which `plan_of` has read:
    accepted here and kept in the reports' reproduce command."""
    given = list(sys.argv[1:] if argv is None else argv)
    command = reproduce(script, given)
    p = parser(plan_of(choices[0]), description=description,
               out_help=f"folder of the runs, one subfolder per {flag} (finished runs are reused)")
    p.set_defaults(out="runs/evidence")
    p.add_argument(f"--{flag}", nargs="+", choices=list(choices), default=list(choices), help=f"the {flag}s to report")
    for name, kw in options:
        p.add_argument(name, **kw)
    args = p.parse_args(given)
    out = {}
    for choice in getattr(args, flag):   # --out holds one folder per choice, which configure reads as the runs' folder
        plan = plan_of(choice)
        one = argparse.Namespace(**{**vars(args), "out": str(Path(args.out) / plan.out.name)})
        out[choice] = run(configure(plan, one), one, command)
    return out


def main(plan: ProtocolPlan, script: str, argv: list[str] | None = None) -> dict[str, Any]:
    """The protocol's command line for the script at path `script`; its reports' reproduce command is
    `python SCRIPT` with these arguments (less --report-only and --arms: reproduce)."""
    given = list(sys.argv[1:] if argv is None else argv)
    command = reproduce(script, given)
    args = parser(plan).parse_args(given)
    return run(configure(plan, args), args, command)
