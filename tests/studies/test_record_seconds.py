"""Runs trained side by side share their evidence folder's timings.json: no entry may be lost."""
import json
import multiprocessing as mp
import sys

import pytest

from examples.studies.evidence import record_seconds

WRITERS, EACH = 6, 25


def _writer(path: str, k: int, start) -> None:
    from pathlib import Path
    start.wait()
    for i in range(EACH):
        record_seconds(Path(path), f"run{k}-{i}", float(k * 100 + i))


@pytest.mark.skipif(sys.platform == "win32", reason="the lock is flock's, which Windows lacks")
def test_parallel_writers_lose_no_entry(tmp_path):
    path = tmp_path / "timings.json"
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(str(path), k, start)) for k in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS     # none read half a file
    times = json.loads(path.read_text())
    assert times == {f"run{k}-{i}": float(k * 100 + i) for k in range(WRITERS) for i in range(EACH)}
    assert not list(tmp_path.glob("*.tmp"))


def test_adds_to_what_is_there(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"flat-seed0": 12.5}))
    record_seconds(path, "hier-seed0", 3.0)
    record_seconds(path, "flat-seed0", 7.0)          # a rerun's time replaces the old one
    assert json.loads(path.read_text()) == {"flat-seed0": 7.0, "hier-seed0": 3.0}
