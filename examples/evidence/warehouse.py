"""Evidence on warehouse: the 3-layer team (dispatcher -> teams -> robots) vs a flat team of the same
8 robots, 3 seeds each at one env-step budget; final delivery rate with 95% bootstrap CIs.

    python examples/evidence/warehouse.py --write docs/evidence      # ~6 runs of a few minutes each

Finished runs in runs/evidence/warehouse are reused; `--steps`, `--seeds`, `--report-only` as in
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
    scenario="warehouse", outcome="delivery_rate", steps=240_000, seeds=[0, 1, 2],
    variants=[Variant("3-layer", ["layers=3"]), Variant("flat", ["layers=1"])],
    common=["workers=2", "epochs=4", *OLD_SCHEDULES],
    eval_episodes=100, out=Path("runs/evidence/warehouse"), also=["deliveries"])

if __name__ == "__main__":
    main(PLAN, "examples/evidence/warehouse.py")
