"""Evidence on the long, sparse skirmish (`skirmish_long`: 40x40, 5 points, difficulty 0.85, the
reward only for a win) per the protocol (docs/evidence/README.md#the-protocol): the flat team on the
env reward, the flat team with skirmish's goal-free shaping (`w_int.low=0.1 unit_shaping=progress`:
`flat_progress_intrinsic`, the nearest living enemy standing in for the goal), and the 3-layer team,
its units first trained as a skill library (`--skills`, 200k of the 1M env frames per run, with one
goal for the whole team held 16 steps, rewarded by `progress_intrinsic`), then frozen
under a commander and squads trained on the env reward alone (`--layer high,mid --load low=SKILLRUN`).
5 seeds each.

    python examples/evidence/skirmish_long.py --write docs/evidence     # docs/evidence/skirmish-long.md and .png

The issue's target: the hierarchy wins >= 60% where the better flat arm wins < 20%. `--out DIR` holds
the runs (default runs/evidence/skirmish-long; finished runs are reused); `--steps`, `--skill-steps`,
`--seeds`, `--episodes`, `--set KEY=VALUE`, `--tag`, `--report-only` as in examples.studies.protocol.

    python examples/evidence/skirmish_long.py --controllers              # the fixed controllers' table

plays fixed controllers on the preset's config (numpy only, seconds): the table in
docs/scenarios/skirmish.md ("The long, sparse skirmish") that the preset's values were chosen
from. The values are not tuned by training runs.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies import protocol
from examples.studies.protocol import ProtocolPlan, SkillStage

SCRIPT = "examples/evidence/skirmish_long.py"
NOTES = [
    "Since 2026-12-05 the shaped flat arm and the skill run use `unit_shaping=progress`. The shaping before "
    "(`distance`, skirmish's default) charges a living unit its distance beyond reach every step, so dying "
    "ends a cost. Under it, on seed 0: the shaped flat team's training win rate (the last 200 episodes) "
    "peaked at 0.92 at 276k frames and fell under 0.05 by 1M (final eval 0.03; at 2M, 0.54 at 354k, then "
    "0.00: skirmish-long-2m.md, made with it); the skill run killed 0.19 of the enemy team, and the "
    "hierarchy won no episode in six designs of its skill stage and commander (per-unit and team-wide skill "
    "goals; units trained on under the commander; a commander giving the whole team one goal; the skills "
    "paid the dense env reward; 500k frames of skills; the git history of this page has their commands). "
    "Under `progress` "
    "(the same seed and budgets) the shaped flat team wins 1.00 of its training episodes from about 150k "
    "frames on and keeps it, and the skill run, under random team goals, kills 0.96 and wins 0.89.",
    "So the preset no longer poses its question. It was chosen, from fixed controllers, so that the better "
    "flat arm would win under 20% at 1M frames (scripted units each on its nearest enemy win 0.04); learned "
    "units under the progress shaping beat the scripted opponent at every difficulty. At its maximum, "
    "`hdppo train skirmish_long --steps 1000000 --seed 0 --out RUN workers=2 layers=1 w_int.low=0.1 "
    "unit_shaping=progress difficulty=1.0` wins 0.87 of its training episodes at 168k frames, and `hdppo "
    "eval RUN --episodes 100 --seed 12345` wins 1.00 [0.96, 1.00] (an exact interval over 100 episodes), "
    "losing 0.08 of its units. The issue's target (the hierarchy >= 60% where the better flat arm < 20%) "
    "cannot be met on this map with this opponent; what the arms can still differ in is how soon they win "
    "and what they lose doing it (steps to threshold, units_lost).",
    "The issue's other sparse reward, only the points held at the end (`reward=points_end`), does not need a "
    "hierarchy either (seed 0, probes cut short, training curves of metrics/run.csv): the shaped flat team "
    "(the flat_shaped arm's arguments plus `reward=points_end`) wins every training episode from 96k frames and "
    "holds 0.34 of the points at the end by 469k, still rising; the hierarchy (the plan's skill run and "
    "commander, both with `reward=points_end`) holds 0.23-0.26 over its first 336k frames under the "
    "commander. A flat team learns to spread onto the points before its last kill by itself.",
    "A diagnostic from before the change, still the one measure of the upper layers alone: the commander "
    "and squads trained over the scripted units (`hdppo train skirmish_long --layer high,mid --steps "
    "1000000 --seed 0 workers=2`; an untrained low layer plays `scripted_low`) on the win reward alone won "
    "0.39 [0.29, 0.49] in the final eval (`hdppo eval RUN --episodes 100 --seed 12345`), their training "
    "win rate near 0.00 up to 880k frames; random squads over the same units win 0.00 (the controllers' "
    "table in docs/scenarios/skirmish.md).",
]

PLAN = ProtocolPlan(
    scenario="skirmish_long", outcome="win", steps=1_000_000,
    flat=["layers=1"], flat_shaped=["layers=1", "w_int.low=0.1", "unit_shaping=progress"], hier=["layers=3"],
    skills=SkillStage(200_000, layer="low", then="high,mid",
                      args=["interval.mid=16", "interval.high=32", "goal_sampler=team", "unit_shaping=progress"]),
    seeds=[0, 1, 2, 3, 4], common=["workers=2"], eval_episodes=100, out=Path("runs/evidence/skirmish-long"),
    also=["points_held", "enemies_killed", "units_lost"], rate=True, name="skirmish-long", notes=NOTES)

CONTROLLERS = {
    "random": "random legal actions (where both flat arms start)",
    "nearest": "scripted units, each on the nearest living enemy (what the flat arm's shaping pays for)",
    "untrained_mid": "scripted units, a uniform goal of mid's space per unit every 4 steps (the 3-layer team "
                     "over skills, before its commander and squads learn)",
    "uniform_squads": "scripted units, a uniform goal of high's space per squad every 16 steps, passed to its units",
    "team_goals": "scripted units, one uniform goal of mid's space for the whole team every 16 steps (the skill "
                  "stage's `goal_sampler=team`)",
    "lanes": "scripted units, squad s on enemy squad s",
    "focus": "scripted units, the whole team on enemy squad 0 (one goal a commander can give)",
}


def play_controller(cfg: Any, name: str, episodes: int = 128, seed: int = 5) -> dict[str, float]:
    """Episode means of one fixed controller on `episodes` copies of the skirmish config `cfg`
    (scripted_low stands in for trained unit skills)."""
    from hdppo.scenarios.skirmish import SkirmishBatch, _ground, _Layout, scripted_low
    env = SkirmishBatch(cfg, episodes, seed=seed)
    lay = _Layout(cfg)
    units = scripted_low(lay)
    rng = np.random.default_rng(0)
    E, U, n_mid, n_high = episodes, env.U, lay.P + lay.G + lay.K, lay.P + lay.G
    goals = np.zeros((E, U), np.int64)
    out: dict[str, np.ndarray] = {}
    ended = np.zeros(E, bool)
    while not ended.all():
        if name == "random":
            actions = np.where(env.action_mask, rng.random(env.action_mask.shape), -1).argmax(-1)
        else:
            if name == "nearest":
                en = env.obs[..., lay.enemy:lay.point].reshape(E, U, lay.K, 4)
                goals = lay.P + lay.G + np.where(en[..., 2] > 0, (en[..., :2] ** 2).sum(-1), np.inf).argmin(-1)
            elif name == "untrained_mid":           # each copy's own clock: copies end at different steps
                goals = np.where((env.t % 4 == 0)[:, None], rng.integers(0, n_mid, (E, U)), goals)
            elif name == "team_goals":
                goals = np.where((env.t % 16 == 0)[:, None], rng.integers(0, n_mid, (E, 1)).repeat(U, 1), goals)
            elif name == "uniform_squads":
                draw = np.repeat(rng.integers(0, n_high, (E, lay.G)), lay.Q, axis=1)
                goals = np.where((env.t % 16 == 0)[:, None], draw, goals)
            elif name == "lanes":
                goals = np.repeat(lay.P + np.arange(lay.G), lay.Q)[None].repeat(E, 0)
            elif name == "focus":
                goals = np.full((E, U), lay.P)
            obs = np.concatenate([env.obs, _ground(env.obs, goals, lay)], -1)
            actions = units(SimpleNamespace(obs=obs, action_mask=env.action_mask))
        length = env.t + 1
        step = env.step(actions)
        for e in np.flatnonzero(step.done & ~ended):
            for k, v in {**env.episode_info(int(e)), "length": float(length[e])}.items():
                out.setdefault(k, np.zeros(E))[e] = v
            ended[e] = True
    return {k: float(v.mean()) for k, v in out.items()}


def controllers_table(overrides: dict[str, str] | None = None, episodes: int = 128) -> str:
    from hdppo.team.scenario import load_scenario
    cfg = load_scenario(PLAN.scenario).make_config(overrides or {})
    lines = [f"Fixed controllers on `{PLAN.scenario}` ({episodes} episodes each, `SkirmishBatch` seed 5):", "",
             "| controller | win | points held | enemies killed | units lost | episode length |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, what in CONTROLLERS.items():
        r = play_controller(cfg, name, episodes)
        lines.append(f"| {what} | {r['win']:.2f} | {r['points_held']:.2f} | {r['enemies_killed']:.2f} | "
                     f"{r['units_lost']:.2f} | {r['length']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    given = list(sys.argv[1:] if argv is None else argv)
    command = protocol.reproduce(SCRIPT, given)
    p = protocol.parser(PLAN, description="the long, sparse skirmish per the evidence protocol")
    p.add_argument("--controllers", action="store_true",
                   help="print the fixed controllers' win rates on the preset (with --set KEY=VALUE scenario keys) "
                        "and exit")
    args = p.parse_args(given)
    if args.controllers:
        keys = dict(item.partition("=")[::2] for item in args.set)
        print(controllers_table(keys))
        return {}
    return protocol.run(protocol.configure(PLAN, args), args, command)


if __name__ == "__main__":
    main()
