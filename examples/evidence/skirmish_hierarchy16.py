"""Evidence on skirmish at hdppo's default `epochs=16`: the 3-layer team (commander -> 3 squads of 4
-> 12 units) vs the flat team of the same 12 units, scripted opponent at its default difficulty,
5 seeds each at 300k env steps. The other skirmish reports ran `epochs=4` (the default then); there
the 3-layer team's lead came from its units' goal shaping. This asks what the hierarchy does at
the default that replaced it, where the flat team alone already wins every episode.

    python examples/evidence/skirmish_hierarchy16.py --write docs/evidence --tag 300k-epochs16

The runs live beside those of skirmish_epochs.py (runs/evidence/skirmish-epochs): its flat
`epochs=16` arm is this report's flat arm, the same command, reused. `epochs=16` is written out so
the commands keep making these runs if the default moves again.

`lr_decay=true clip_vloss=false` are pinned: the runs were made under those defaults (now a
constant learning rate and a clipped value loss).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies.evidence import OLD_SCHEDULES, EvidencePlan, Variant, main

PLAN = EvidencePlan(
    scenario="skirmish", outcome="win", steps=300_000, seeds=[0, 1, 2, 3, 4],
    variants=[Variant("3-layer-epochs16", ["layers=3", "epochs=16"]),
              Variant("flat-epochs16", ["layers=1", "epochs=16"])],
    common=["workers=2", *OLD_SCHEDULES], eval_episodes=100, out=Path("runs/evidence/skirmish-epochs"),
    also=["points_held", "enemies_killed", "units_lost"])

if __name__ == "__main__":
    main(PLAN, "examples/evidence/skirmish_hierarchy16.py")
