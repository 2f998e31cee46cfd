"""Evidence for the PPO epochs default on a scenario of ours: the flat team of 12 units on skirmish
(scripted opponent at its default difficulty) with `epochs=16` and `epochs=8` against `epochs=4`
(the default when this was run; these runs made the default 16), 5 seeds each at 300k env steps.
On the VMAS tasks of docs/evidence/external.md, `epochs=16` closed the gap to BenchMARL MAPPO; this
checks whether the same setting helps, or costs, on skirmish.

    python examples/evidence/skirmish_epochs.py --write docs/evidence --tag epochs

Finished runs in runs/evidence/skirmish-epochs are reused; `--steps`, `--seeds`, `--variant`,
`--report-only` as in examples.studies.evidence.main.

`lr_decay=true clip_vloss=false` are pinned: the runs were made under those defaults (now a
constant learning rate and a clipped value loss).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies.evidence import OLD_SCHEDULES, EvidencePlan, Variant, main

PLAN = EvidencePlan(
    scenario="skirmish", outcome="win", steps=300_000, seeds=[0, 1, 2, 3, 4],
    variants=[Variant("flat-epochs16", ["layers=1", "epochs=16"]), Variant("flat-epochs8", ["layers=1", "epochs=8"]),
              Variant("flat", ["layers=1", "epochs=4"])],
    common=["workers=2", *OLD_SCHEDULES], eval_episodes=100, out=Path("runs/evidence/skirmish-epochs"),
    also=["points_held", "enemies_killed", "units_lost"])

if __name__ == "__main__":
    main(PLAN, "examples/evidence/skirmish_epochs.py")
