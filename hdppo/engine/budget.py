"""What a training budget buys each layer: env steps per update, updates, lr at the last update.

Pure arithmetic over the run's config, shared by the trainer (which prints it at train start and
warns about starved layers) and by the loop (whose schedules use `schedule_progress`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

FEW_UPDATES = 10          # fewer updates than this in a run is a warning


def schedule_progress(stage_steps: int, span: int, stage_total: int) -> float:
    """A layer's schedule position for the update learning from the rollout that ends at
    `stage_steps`: where that rollout started (CleanRL decays per iteration the same way), so
    the first update of a stage runs at the configured lr and entropy and the last above 0."""
    return max(stage_steps - span, 0) / max(stage_total, 1)


@dataclass(frozen=True)
class LayerBudget:
    """One trained layer in one stage."""

    layer: str
    stage: str
    rollout: int                # env steps per copy between two updates
    span: int                   # env steps of the whole run between two updates (all copies)
    transitions: int            # decisions per update when every slot is alive
    updates: int                # updates this stage gives the layer
    lr_first: float
    lr_last: float


@dataclass(frozen=True)
class StageBudget:
    name: str
    steps: int                  # as asked
    runs: int                   # as it will run: whole collection rounds
    layers: list[LayerBudget]


def plan_budget(stages: list, layer_cfgs: dict, intervals: dict[str, int], slots: dict[str, int],
                n_workers: int, envs: int) -> list[StageBudget]:
    """Per stage and trained layer: what the budget buys (sync mode; async is about the same)."""
    out = []
    for stage in stages:
        rollouts = {n: layer_cfgs[n].rollout_steps(intervals[n]) for n in stage.trained}
        round_steps = min(rollouts.values()) * envs * n_workers   # one collection round ends at the first due layer
        runs = math.ceil(stage.steps / round_steps) * round_steps
        layers = []
        for name in stage.trained:
            lc, rollout = layer_cfgs[name], rollouts[name]
            span = rollout * envs * n_workers
            updates = runs // span
            pool = min(lc.pool or n_workers, n_workers)
            transitions = (rollout // intervals[name]) * slots[name] * envs * pool
            last = schedule_progress(updates * span, span, stage.steps) if updates else 0.0
            lr_last = lc.lr * (1.0 - min(last, 1.0)) if lc.lr_decay else lc.lr
            layers.append(LayerBudget(name, stage.name, rollout, span, transitions, updates, lc.lr, lr_last))
        out.append(StageBudget(stage.name, stage.steps, runs, layers))
    return out


def starved(budget: list[StageBudget], envs: int, n_workers: int, intervals: dict[str, int]) -> list[str]:
    """One warning per layer that gets fewer than FEW_UPDATES updates in a stage, with what to change."""
    out = []
    for stage in budget:
        for lb in stage.layers:
            if lb.updates >= FEW_UPDATES:
                continue
            need_steps = FEW_UPDATES * lb.span
            k = intervals[lb.layer]
            rollout = (stage.steps // (FEW_UPDATES * envs * n_workers)) // k * k
            fix = f"raise --steps so this stage gets >= {need_steps:,} env steps"
            if rollout >= k:
                fix += f", or set {lb.layer}.rollout={rollout} (env steps per copy; now {lb.rollout})"
            else:
                fix += ", or lower envs_per_worker"
            out.append(f"layer {lb.layer!r} gets {lb.updates} update(s) in stage {stage.name} "
                       f"(one per {lb.span:,} env steps = rollout {lb.rollout} x {envs} envs x {n_workers} workers); "
                       f"{fix}")
    return out


def format_budget(budget: list[StageBudget]) -> list[str]:
    """Lines for the train-start report."""
    lines = []
    for stage in budget:
        head = f"stage {stage.name}: {stage.steps:,} env steps"
        if stage.runs != stage.steps:
            head += (f", runs {stage.runs:,} (rounded up to whole collection rounds of "
                     f"{min(lb.span for lb in stage.layers):,} env steps)")
        lines.append(head)
        for lb in stage.layers:
            lines.append(f"  {lb.layer}: {lb.updates} updates, one per {lb.span:,} env steps (rollout {lb.rollout} "
                         f"per copy, ~{lb.transitions:,} decisions), lr {lb.lr_first:.2g} -> {lb.lr_last:.2g}")
    return lines
