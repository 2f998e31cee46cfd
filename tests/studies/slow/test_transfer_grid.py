"""The transfer study (examples/evidence/transfer.py) end to end on grid, at a budget of seconds: a
campaign cut off keeps the arms it finished in the report's data file; on a machine without the run
folders the same command trains only the arms that have no record, and the report's per-seed finals
are the records'; the report is rewritten from the data file alone, with pending seeds named, and a
record the code would no longer make is refused."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

import examples.evidence.transfer as transfer
from examples.evidence.transfer import FINETUNED, FLAT, PRETRAIN, SKILLS, TRANSFER, Task, TransferPlan, main
from examples.studies.protocol import read_records


def _plan():
    # epochs=2: the study's plumbing does not need the default's 16 passes (most of the runs' CPU)
    return TransferPlan(name="transfer-grid", outcome="success", source=Task("grid"), target=Task("grid", ["size=9"]),
                        steps=1024, skill_steps=512, pretrain_steps=512, flat=["layers=1"], flat_shaped=None,
                        hier=["layers=2"], then="high",
                        common=["workers=1", "backend=inline", "envs_per_worker=8", "log_every=0", "epochs=2"],
                        eval_episodes=8, rate=True)


@pytest.mark.long(30)
def test_a_transfer_campaign_cut_off_keeps_the_arms_it_finished_in_its_data_file(tmp_path, monkeypatch):
    out, docs = tmp_path / "runs", tmp_path / "docs"
    monkeypatch.setitem(transfer.PLANS, "grid", _plan())
    argv = ["--task", "grid", "--seeds", "0", "--out", str(out), "--write", str(docs)]
    plan = dataclasses.replace(_plan(), out=out / "transfer-grid", seeds=[0])     # what the command line makes
    real = transfer.train_run

    def cut(run, *args, **kw):               # the session ends while the fine-tuned arm trains on the target
        if run == plan.run_dir(FINETUNED, 0):
            raise KeyboardInterrupt
        real(run, *args, **kw)
    monkeypatch.setattr(transfer, "train_run", cut)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    data_path = docs / "transfer-grid-runs.json"
    data = read_records(data_path)
    assert sorted(data) == [(FLAT, 0), (TRANSFER, 0)]          # the arms whose runs had finished
    assert len(data[TRANSFER, 0]["configs"]) == 2 and data[TRANSFER, 0]["source_frames"] >= 512
    assert data[TRANSFER, 0]["commands"][0].startswith("hdppo train grid --steps 512")     # its skill run first
    with pytest.raises(SystemExit, match=r"no seed of \[0\] has all three arms"):
        main([*argv, "--report-only"])

    shutil.rmtree(out)                       # the next session's machine: the run folders are gone
    trained: list = []
    monkeypatch.setattr(transfer, "train_run", lambda run, *a, **k: (trained.append(run), real(run, *a, **k)))
    summary = main(argv)["grid"]
    assert trained == [plan.run_dir(PRETRAIN, 0), plan.run_dir(FINETUNED, 0)]   # only the arm with no record
    for arm in (TRANSFER, FLAT):
        assert summary["arms"][arm]["per_seed"] == [data[arm, 0]["final"]]
        assert summary["arms"][arm]["frames"] == [data[arm, 0]["frames"]]
    assert not (out / "transfer-grid" / f"{SKILLS}-seed0").exists()
    kept = read_records(data_path)
    assert sorted(kept) == [(FINETUNED, 0), (FLAT, 0), (TRANSFER, 0)]
    assert summary["arms"][FINETUNED]["per_seed"] == [kept[FINETUNED, 0]["final"]]

    # the report from the data file alone, seed 1 not trained yet: seed 0's, seed 1 named as pending
    shutil.rmtree(out)
    monkeypatch.setattr(transfer, "train_run", lambda *a, **k: pytest.fail("trained again"))
    part = main([*argv, "--report-only", "--seeds", "0", "1"])["grid"]
    assert part["pending"] == [1]
    for arm in plan.arms():
        assert part["arms"][arm]["per_seed"] == summary["arms"][arm]["per_seed"]
        assert part["arms"][arm]["curve"] == pytest.approx(summary["arms"][arm]["curve"], nan_ok=True)
    assert part["threshold"] == pytest.approx(summary["threshold"], nan_ok=True)
    text = (docs / "transfer-grid.md").read_text()
    assert "**Incomplete**: seeds [1] of this command are not finished; this report covers seeds [0]" in text
    assert "(10 training runs; finished ones are reused)" in text

    records = json.loads(data_path.read_text())  # a record made with settings the code no longer gives is refused
    records[0]["configs"][0]["train"]["layers"]["low"]["epochs"] = 3
    data_path.write_text(json.dumps(records))
    with pytest.raises(SystemExit, match=r"data file were made with settings(?s:.*)epochs: 3 in the run, 2 now"):
        main([*argv, "--report-only"])
