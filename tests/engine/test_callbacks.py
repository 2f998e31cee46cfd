"""Callbacks: `hdppo.train(..., callbacks=[...])` is told of every update and commit, and may stop
the run at a round boundary, leaving a complete folder that `--resume` continues."""
from __future__ import annotations

import json

import pytest

import hdppo
from hdppo.engine.callbacks import Callbacks, Event
from hdppo.engine.metrics import read_csv
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from hdppo.errors import ConfigError, HdppoError


class Recorder(hdppo.Callback):
    def __init__(self, stop_after_updates: int | None = None) -> None:
        self.events: list[Event] = []
        self.stop_after = stop_after_updates

    def on_update(self, event: Event) -> bool:
        self.events.append(event)
        n = sum(e.kind == "update" for e in self.events)
        return self.stop_after is not None and n >= self.stop_after

    def on_commit(self, event: Event) -> None:
        self.events.append(event)


def test_every_update_and_commit_reaches_the_callbacks(tmp_path, tiny):
    rec = Recorder()
    run = hdppo.train("grid", tiny | {"steps": 320, "checkpoint_every": 4}, layers="low", out=tmp_path / "r",
                      callbacks=[rec])
    updates = [e for e in rec.events if e.kind == "update"]
    rows = read_csv(run, "low")
    assert len(updates) == len(rows) == 10
    for event, row in zip(updates, rows):
        assert event.layer == "low" and event.stage == "concurrent" and event.run_dir == run
        assert event.env_steps == row["step"]
        assert event.metrics["version"] == row["version"]
        assert event.metrics["optimizer_steps"] == row["optimizer_steps"]
    commits = [e.commit for e in rec.events if e.kind == "commit"]
    kept = sorted(int(p.name) for p in (run / "commits").iterdir() if p.name.isdigit())   # older ones pruned
    assert commits == list(range(len(commits))) and commits[-len(kept):] == kept
    assert len(commits) == 4                                  # after updates 4 and 8, the first, the stage's end


def test_a_callback_stops_the_run_and_resume_finishes_it(tmp_path, tiny):
    rec = Recorder(stop_after_updates=3)
    run = hdppo.train("grid", tiny | {"steps": 640}, layers="low", out=tmp_path / "r", callbacks=[rec])
    state = json.loads((run / "state.json").read_text())
    assert state["finished"] is False and state["env_steps"] == 3 * 32     # stopped at the 3rd round boundary
    assert sum(e.kind == "update" for e in rec.events) == 3
    assert rec.events[-1].kind == "commit" and rec.events[-1].env_steps == 96
    assert len(read_csv(run, "low")) == 3

    trainer = Trainer(RunSpec.from_run(run), resume=True)
    trainer.run()
    state = json.loads((run / "state.json").read_text())
    assert state["finished"] is True and state["env_steps"] == 640
    assert len(read_csv(run, "low")) == 20


def test_the_stop_reason_is_in_the_summary(tmp_path, tiny):
    from hdppo.engine.config import resolve_overrides
    tc, scen = resolve_overrides({k: str(v) for k, v in (tiny | {"steps": 640}).items()}, ["high", "mid", "low"],
                                 set())
    trainer = Trainer(RunSpec("grid", scen, tc, ["low"], {}, tmp_path / "r"), callbacks=[Recorder(2)])
    summary = trainer.run()
    assert summary["concurrent"]["stopped_by"] == "Recorder.on_update at env step 64"
    assert summary["concurrent"]["env_steps"] == 64


def test_a_failing_callback_is_one_error_naming_it_and_the_last_commit_stands(tmp_path, tiny):
    class Broken(hdppo.Callback):
        def on_commit(self, event: Event) -> None:
            if event.commit == 1:
                raise ValueError("boom")

    with pytest.raises(HdppoError, match=r"callback Broken.on_commit raised ValueError: boom") as info:
        hdppo.train("grid", tiny | {"steps": 640, "checkpoint_every": 2}, layers="low", out=tmp_path / "r",
                    callbacks=[Broken()])
    assert "--resume" in info.value.fix and isinstance(info.value.__cause__, ValueError)
    assert (tmp_path / "r" / "commits" / "000001").is_dir()      # written before the callback ran


def test_an_object_without_hooks_is_refused():
    with pytest.raises(ConfigError, match="has none of on_update, on_commit, on_eval"):
        Callbacks([object()])
    assert Callbacks([type("OnlyEval", (), {"on_eval": lambda self, e: None})()])
