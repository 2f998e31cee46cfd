"""Tests for hdppo.engine.metrics: CSV + TensorBoard sink, progress lines, CPU meter."""

from __future__ import annotations

import io
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hdppo.engine.metrics import CpuMeter, MetricsSink, Progress, cpu_utilisation, read_csv, scope_file


def test_csv_round_trip(tmp_path: Path) -> None:
    with MetricsSink(tmp_path, tensorboard=False) as sink:
        sink.log("low", 1, {"loss": 0.5, "kl": 0.01})
        sink.log("low", 2, {"loss": 0.25, "kl": 0.02})
        sink.log("low/worker_0", 2, {"sps": 123.0})
    path = tmp_path / "metrics" / "low.csv"
    assert path.exists() and scope_file(tmp_path, "low/worker_0").name == "low__worker_0.csv"
    assert path.read_text().splitlines()[0] == "step,wall_time,kl,loss"
    rows = read_csv(tmp_path, "low")
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["loss"] for r in rows] == [0.5, 0.25]
    assert [r["kl"] for r in rows] == [0.01, 0.02]
    assert all(r["wall_time"] > 1e9 for r in rows)
    assert read_csv(tmp_path, "low/worker_0") == [
        {"step": 2, "wall_time": read_csv(tmp_path, "low/worker_0")[0]["wall_time"], "sps": 123.0}
    ]


def test_header_union_when_key_appears(tmp_path: Path) -> None:
    sink = MetricsSink(tmp_path, tensorboard=False)
    sink.log("mid", 1, {"b": 1.0})
    sink.log("mid", 2, {"b": 2.0, "a": 3.0})
    sink.log("mid", 3, {"a": 4.0})
    sink.close()
    lines = (tmp_path / "metrics" / "mid.csv").read_text().splitlines()
    assert lines[0] == "step,wall_time,a,b"
    assert len(lines) == 4
    rows = read_csv(tmp_path, "mid")
    assert math.isnan(rows[0]["a"]) and rows[0]["b"] == 1.0
    assert rows[1]["a"] == 3.0 and rows[1]["b"] == 2.0
    assert rows[2]["a"] == 4.0 and math.isnan(rows[2]["b"])


def test_resume_appends(tmp_path: Path) -> None:
    with MetricsSink(tmp_path, tensorboard=False) as sink:
        sink.log("run", 1, {"x": 1.0})
    with MetricsSink(tmp_path, tensorboard=False) as sink:
        sink.log("run", 2, {"x": 2.0, "y": 5.0})
    rows = read_csv(tmp_path, "run")
    assert [r["x"] for r in rows] == [1.0, 2.0]
    assert math.isnan(rows[0]["y"]) and rows[1]["y"] == 5.0


def test_nan_is_empty_cell(tmp_path: Path) -> None:
    with MetricsSink(tmp_path, tensorboard=False) as sink:
        sink.log("high", 5, {"ret": float("nan"), "kl": 0.1})
    line = (tmp_path / "metrics" / "high.csv").read_text().splitlines()[1]
    assert line.startswith("5,") and line.endswith(",0.1,")
    row = read_csv(tmp_path, "high")[0]
    assert math.isnan(row["ret"]) and row["kl"] == 0.1


def test_invalid_scope_and_reserved_key(tmp_path: Path) -> None:
    with MetricsSink(tmp_path, tensorboard=False) as sink:
        with pytest.raises(ValueError, match="scope"):
            sink.log("low//x", 1, {"a": 1.0})
        with pytest.raises(ValueError, match="reserved"):
            sink.log("low", 1, {"step": 1.0})
    with pytest.raises(RuntimeError, match="close"):
        sink.log("low", 1, {"a": 1.0})


def test_tensorboard_event_file(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsSink(tmp_path) as sink:
        sink.log("low", 1, {"loss": 0.5, "ret": float("nan")})
        sink.log("low/worker_0", 1, {"sps": 10.0})
        sink.log("low", 2, {"loss": 0.25, "ret": 1.0})
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"low/loss", "low/ret", "low/worker_0/sps"} <= set(tags)
    assert [(e.step, e.value) for e in acc.Scalars("low/loss")] == [(1, 0.5), (2, 0.25)]
    assert [e.step for e in acc.Scalars("low/ret")] == [2]  # NaN skipped


LAYERS = {
    "low": {"optimizer_steps": 3, "return": 1.25, "goal_success": 0.5, "kl": 0.01, "clipfrac": 0.1,
            "version": 3},
    "high": {"optimizer_steps": 1, "return": float("nan")},
}


def test_progress_non_tty_prints_lines(capsys) -> None:
    with Progress(target_steps=1000, interval_s=3600) as prog:
        assert not prog.live  # captured stdout is not a TTY
        prog.update(100, 432.0, LAYERS)
        prog.update(200, 999.0, LAYERS)  # throttled
        prog.print("a message")
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3  # first update, the message, final state on stop
    assert "SPS 432" in out[0] and "steps 100/1,000 (10.0%)" in out[0]
    assert "low: opt 3 ret 1.25 goal 0.50" in out[0] and "high: opt 1 ret -" in out[0]
    assert out[1] == "a message"
    assert "SPS 999" in out[2] and "steps 200/1,000" in out[2]


def test_progress_disabled_on_tty_prints_lines() -> None:
    class FakeTty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTty()
    prog = Progress(enabled=False, interval_s=0.0, stream=stream).start()
    assert not prog.live
    prog.update(10, 5.0, {})
    prog.update(20, 6.0, {})
    prog.stop()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "SPS 6" in lines[1]


def test_progress_live_on_tty() -> None:
    class FakeTty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = FakeTty()
    with Progress(target_steps=100, stream=stream) as prog:
        assert prog.live
        prog.update(50, 1234.0, LAYERS)
    assert not prog.live
    text = stream.getvalue()
    assert "1,234" in text and "low" in text and "clipfrac" in text


def test_cpu_meter_counts_children() -> None:
    import psutil

    assert cpu_utilisation() == 0.0  # first call: baseline
    meter = CpuMeter()
    assert meter() == 0.0
    start = time.monotonic()
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        proc = psutil.Process(child.pid)
        deadline = time.monotonic() + 10.0
        while sum(proc.cpu_times()[:2]) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.02)
        pct = meter()
        wall = time.monotonic() - start
    finally:
        child.kill()
        child.wait()
    assert pct * wall / 100.0 >= 0.28  # the child's CPU seconds were counted
    assert cpu_utilisation() >= 0.0
