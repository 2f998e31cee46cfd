"""Evidence on SMAX's hard maps per the protocol (docs/evidence/README.md#the-protocol): on 5m_vs_6m
and smacv2_10_units, the flat team on the env reward, the flat team with SMAX's goal-free shaping
(`w_int.low=0.1`: the health its nearest living enemy lost, the hierarchy's units' reward with
the nearest enemy standing in for the goal), and the target hierarchy (`hier=true`: a commander
assigns each squad an enemy, squads each unit; every layer trained together, the commander and
squads on the env reward alone). 5 seeds each, 2,015,232 env frames per run: the frames of
examples/benchmarks/vs_jaxmarl.py's rows, so the arms line up with JaxMARL's on the same maps.

    python examples/evidence/smax.py --write docs/evidence          # docs/evidence/smax-MAP.md and .png

`--design skills` trains the hierarchy the way that worked on the long skirmish instead: its units
first as a skill library (`--skills goal_sampler=team` for SKILL_FRAMES of its budget: one living
enemy per decision for the whole team, so they learn to fire together), then a fresh commander and
squads over them, frozen, on the env reward (`--layer high,mid --load low=SKILLRUN`); its reports
are smax-MAP-skills (the flat arms are trained again in their folder: each folder holds one plan).

The issue's target: on the hard maps the hierarchy beats the better flat arm, the interval of
the difference above 0. `--map` picks some of them; `--out DIR` holds the runs in DIR/smax-MAP
(default runs/evidence), finished runs are reused; `--steps`, `--seeds`, `--episodes`,
`--set KEY=VALUE`, `--tag`, `--report-only`, `--arms` as in examples.studies.protocol. The shaping's
weight and the layers' intervals are the scenario's defaults, not tuned.
"""
import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies import protocol
from examples.studies.protocol import ProtocolPlan, SkillStage

SCRIPT = "examples/evidence/smax.py"
MAPS = ("5m_vs_6m", "smacv2_10_units")
FRAMES = 123 * 128 * 128        # vs_jaxmarl.py's 2M frames: a whole number of JaxMARL updates
SKILL_FRAMES = 400_000          # --design skills: a fifth of the budget, the long skirmish's share
DESIGNS = ("joint", "skills")
DESIGN_FLAG: tuple[str, dict[str, Any]] = (
    "--design", {"choices": DESIGNS, "default": "joint",
                 "help": "joint: every layer trained together; skills: units first as a skill library"})


def plan(map_name: str, out: Path = Path("runs/evidence"), design: str = "joint") -> ProtocolPlan:
    """The protocol's plan of one map, its runs in OUT/smax-MAP (OUT/smax-MAP-skills for the skills design)."""
    if design not in DESIGNS:
        raise ValueError(f"design {design!r} is not one of {DESIGNS}")
    skills = (SkillStage(SKILL_FRAMES, args=["goal_sampler=team"], layer="low", then="high,mid")
              if design == "skills" else None)
    name = f"smax-{map_name}" + ("-skills" if skills else "")
    return ProtocolPlan(
        scenario=f"smax_{map_name}", outcome="win", steps=FRAMES,
        flat=[], flat_shaped=["w_int.low=0.1"], hier=["hier=true"], skills=skills, seeds=[0, 1, 2, 3, 4],
        common=["workers=2"], eval_episodes=100, out=out / name,
        also=["allies_alive", "enemies_killed"], rate=True, name=name)


def main(argv: list[str] | None = None) -> dict[str, dict]:
    given = list(sys.argv[1:] if argv is None else argv)
    first = argparse.ArgumentParser(add_help=False)     # the design picks the plans; main_each parses the rest
    first.add_argument(DESIGN_FLAG[0], **DESIGN_FLAG[1])
    chosen = first.parse_known_args(given)[0].design
    return protocol.main_each(lambda m: plan(m, design=chosen), MAPS, "map", SCRIPT,
                              "SMAX's hard maps per the evidence protocol", given, options=[DESIGN_FLAG])


if __name__ == "__main__":
    main()
