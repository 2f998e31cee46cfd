"""Evidence is made by the code it ships with: one arm of the skirmish report, re-run at the small
budget recorded in docs/evidence/drift-skirmish.json, must still give the recorded numbers.

On the recording's torch version and processor, training is deterministic (one inline worker, fixed
seed), so the trained parameters' checksum and the eval return must match exactly; elsewhere float
rounding may differ, and the eval return must stay within 4 standard errors."""
from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from examples.studies import drift
from hdppo import provenance
from tests.helpers import ROOT

RECORD = ROOT / "docs" / "evidence" / "drift-skirmish.json"
HOW = ("training no longer gives what the evidence in docs/evidence was made with: re-run the evidence "
       "with this code, then `python -m examples.studies.drift --write docs/evidence/drift-skirmish.json`")


@pytest.mark.slow
def test_the_skirmish_reports_flat_arm_gives_its_recorded_numbers(tmp_path: Path) -> None:
    record = json.loads(RECORD.read_text())
    assert record["probe"] == drift.PROBE, "the record was made with other probe settings; rewrite it"
    want, got = record["result"], drift.measure(tmp_path)
    same = (record["provenance"]["versions"].get("torch") == metadata.version("torch")
            and record["provenance"].get("cpu") == provenance.cpu_model())
    if same:
        assert got["param_checksum"] == pytest.approx(want["param_checksum"], rel=1e-12, abs=1e-9), HOW
        assert got["team_return"] == pytest.approx(want["team_return"], abs=1e-9), HOW
    else:
        se = max(want["team_return_se"], got["team_return_se"], 1e-6)
        assert abs(got["team_return"] - want["team_return"]) <= 4 * se, HOW
        assert abs(got["win"] - want["win"]) <= 4 * max(want["win_se"], got["win_se"], 0.05), HOW
