"""Evidence on battle (MAgent2): the 3-layer team (commander -> squads of 9 -> units) vs a flat team of
the same 16 red units against the scripted blue team, 3 seeds each at one env-step budget; final win
rate with 95% bootstrap CIs, kills and survivors beside it.

    python examples/evidence/battle.py --write docs/evidence

Finished runs in runs/evidence/battle are reused; `--steps`, `--seeds`, `--report-only` as in
examples.studies.evidence.main.

`epochs=4 lr_decay=true clip_vloss=false` are pinned: these runs were made under those defaults
(now 16 epochs, a constant learning rate and a clipped value loss), and the listed commands must
still make them.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root, for examples.studies
from examples.studies.evidence import OLD_SCHEDULES, EvidencePlan, Variant, main

PLAN = EvidencePlan(
    scenario="battle", outcome="win", steps=300_000, seeds=[0, 1, 2],
    variants=[Variant("3-layer", ["layers=3"]), Variant("flat", ["layers=1"])],
    common=["workers=2", "epochs=4", *OLD_SCHEDULES],
    eval_episodes=50, out=Path("runs/evidence/battle"), also=["kills", "survivors"])

if __name__ == "__main__":
    main(PLAN, "examples/evidence/battle.py")
