"""examples/evidence/balance.py: its three arms differ only by what each tests (the exploration bonus,
the layers) and run at hdppo's default config on the same frames and seeds."""
from __future__ import annotations


def test_the_arms_differ_only_by_the_thing_each_tests():
    from examples.evidence.balance import PLAN
    from examples.studies.protocol import FLAT, HIER, SHAPED
    out = PLAN.out
    flat, shaped, hier = (PLAN.command(arm, 3) for arm in (FLAT, SHAPED, HIER))
    assert flat[:2] == ["hdppo", "train"] and "--steps" in flat and flat[flat.index("--steps") + 1] == "300000"
    assert shaped == [str(out / "flat_shaped-seed3") if a == str(out / "flat-seed3") else a for a in flat] + [
        "ent_coef=0.03", "ent_coef_final=0.03"]
    assert hier == [str(out / "hier-seed3") if a == str(out / "flat-seed3") else a
                    for a in flat if a != "layers=1"] + ["layers=3", "squad_size=2"]
    assert not any(a.startswith(("epochs=", "lr", "minibatches=")) for a in flat + shaped + hier)   # the default
    assert PLAN.seeds == [0, 1, 2, 3, 4] and PLAN.skills is None
