"""Evaluation during training (eval_every): rows in metrics/eval.csv at the due steps, on_eval events
that may stop the run, RUN/best kept through pruning and resume, and training numbers unchanged."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from safetensors.torch import load_file

import hdppo
import hdppo.runtime.evaluate as runtime_evaluate
from hdppo.engine.callbacks import Event
from hdppo.engine.commit import BEST, BEST_STORE, list_commits, open_commit, read_best, recover, write_best
from hdppo.engine.metrics import read_csv
from hdppo.engine.spec import RunSpec
from hdppo.engine.trainer import Trainer
from hdppo.errors import ConfigError
from tests.helpers.cli import cli

EVAL = {"eval_every": 100, "eval_episodes": 2}


class Evals(hdppo.Callback):
    """Records eval events; asks to stop at the `stop_at`-th one."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.events: list[Event] = []
        self.stop_at = stop_at

    def on_eval(self, event: Event) -> bool:
        self.events.append(event)
        return len(self.events) == self.stop_at


@pytest.fixture
def scores(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The top layer's evaluated return, in order, replaced by the values the test appends here."""
    given: list[float] = []
    feed: Iterator[float] = iter(given)
    real = runtime_evaluate.evaluate

    def evaluate(*args, **kwargs):
        result = real(*args, **kwargs)
        value = next(feed)
        result["layers"]["high"] = (value, value, value)
        return result
    monkeypatch.setattr(runtime_evaluate, "evaluate", evaluate)
    return given


def steps_of(run) -> list[int]:
    return [int(r["step"]) for r in read_csv(run, "eval")]


def test_evals_come_at_the_first_boundary_after_each_multiple_and_at_the_end(tmp_path, tiny, capsys):
    run = hdppo.train("grid", tiny | EVAL | {"steps": 320, "progress": "lines"}, layers="low", out=tmp_path / "r")
    rows = read_csv(run, "eval")
    assert steps_of(run) == [128, 224, 320]                   # rounds of 32 env steps; 320 is the end
    for row in rows:
        commit = open_commit(run, int(row["commit"])) if int(row["commit"]) in list_commits(run) else None
        assert commit is None or commit.env_steps == row["step"]     # the eval scored that boundary's commit
        assert row["episodes"] == 2 and {"return/low", "return/high", "team_return", "length", "score"} <= set(row)
        assert "outcome/targets_claimed" in row               # the scenario's outcomes, as hdppo eval reports
    assert int(rows[-1]["commit"]) == list_commits(run)[-1]   # the end of training scores the final commit
    out = capsys.readouterr().out
    assert "[hdppo eval] step 128 commit 1:" in out and "[hdppo eval] step 320" in out
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("eval/return/low")] == [128, 224, 320]

    again = hdppo.train("grid", tiny | EVAL | {"steps": 320, "eval_every": 64}, layers="low", out=tmp_path / "b")
    assert steps_of(again) == [64, 128, 192, 256, 320]       # the end is evaluated once


def test_off_by_default(tmp_path, tiny):
    run = hdppo.train("grid", tiny | {"steps": 64}, layers="low", out=tmp_path / "r")
    assert not (run / "metrics" / "eval.csv").exists() and not (run / BEST).exists()


def test_eval_events_reach_callbacks_and_a_true_return_stops_training(tmp_path, tiny):
    rec = Evals(stop_at=2)
    run = hdppo.train("grid", tiny | EVAL | {"steps": 640}, layers="low", out=tmp_path / "r", callbacks=[rec])
    assert [e.env_steps for e in rec.events] == [128, 224]
    first = rec.events[0]
    assert first.kind == "eval" and first.run_dir == run and first.stage == "concurrent" and first.commit == 1
    assert first.metrics == {k: v for k, v in read_csv(run, "eval")[0].items() if k not in ("step", "wall_time")}
    state = json.loads((run / "state.json").read_text())
    assert state["finished"] is False and state["env_steps"] == 224 and state["eval_steps"] == 224

    Trainer(RunSpec.from_run(run), resume=True).run()          # the stopped run's eval is recorded: not redone
    assert steps_of(run) == [128, 224, 320, 416, 512, 608, 640]


def test_a_resumed_run_redoes_the_eval_its_commit_did_not_record(tmp_path, tiny):
    run = hdppo.train("grid", tiny | EVAL | {"steps": 320}, layers="low", out=tmp_path / "r")
    first = read_csv(run, "eval")
    Trainer(RunSpec.from_run(run, steps=448), resume=True).run()   # the final eval's row came after the commit
    rows = read_csv(run, "eval")
    assert steps_of(run) == [128, 224, 320, 416, 448]
    assert rows[2]["return/low"] == first[2]["return/low"]     # the same commit on the same episodes


def test_best_is_the_highest_scoring_commit_and_outlives_pruning(tmp_path, tiny, scores, capsys):
    scores += [1.0, 3.0, 2.0]
    seen: dict[int, bytes] = {}

    class Keep(hdppo.Callback):
        def on_eval(self, event: Event) -> None:
            seen[event.commit] = (event.run_dir / "commits" / f"{event.commit:06d}" / "low" /
                                  "tensors.safetensors").read_bytes()

    run = hdppo.train("grid", tiny | EVAL | {"steps": 320, "checkpoint_every": 1}, layers="low",
                      out=tmp_path / "r", callbacks=[Keep()])
    rows = read_csv(run, "eval")
    assert [r["score"] for r in rows] == [1.0, 3.0, 2.0] and [r["best_score"] for r in rows] == [1.0, 3.0, 3.0]
    best = read_best(run)
    assert best is not None and best["score"] == 3.0 and best["metric"] == "return/high"
    assert best["commit"] == int(rows[1]["commit"]) and best["env_steps"] == 224
    assert best["commit"] not in list_commits(run)              # pruned; the best is a copy
    assert (run / BEST / "low" / "tensors.safetensors").read_bytes() == seen[best["commit"]]
    assert seen[best["commit"]] != seen[int(rows[-1]["commit"])]      # not the newest weights
    assert [p.name for p in (run / BEST_STORE).iterdir()] == [(run / BEST).resolve().name]   # older bests removed

    team = hdppo.load(run, checkpoint="best")
    assert team.layers[2].checkpoint == str(run / BEST / "low")
    scores += [0.0, 0.0]
    assert runtime_evaluate.evaluate(run, 2, checkpoint="best")["acting"]["low"] == "checkpoint"
    rc, out, _ = cli(capsys, "eval", run, "--episodes", "2", "--checkpoint", "best", "--json")
    assert rc == 0 and json.loads(out)["checkpoint"] == "best"


def test_best_survives_resume_and_is_compared_against(tmp_path, tiny, scores):
    scores += [1.0, 3.0]
    run = hdppo.train("grid", tiny | EVAL | {"steps": 640}, layers="low", out=tmp_path / "r",
                      callbacks=[Evals(stop_at=2)])
    assert read_best(run)["commit"] == 2
    scores += [2.0, 2.5, 1.0, 0.0, 2.9]                        # all below the best before the resume
    Trainer(RunSpec.from_run(run), resume=True).run()
    best = read_best(run)
    assert best is not None and best["commit"] == 2 and best["score"] == 3.0
    assert [r["best_score"] for r in read_csv(run, "eval")] == [1.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]


def test_a_lower_is_better_metric(tmp_path, tiny, scores):
    scores += [5.0, 2.0, 4.0]
    run = hdppo.train("grid", tiny | EVAL | {"steps": 320, "eval_metric": "-return/high"}, layers="low",
                      out=tmp_path / "r")
    assert read_best(run)["score"] == 2.0 and read_best(run)["env_steps"] == 224


def test_training_numbers_are_the_same_with_eval_on_and_off(tmp_path, tiny):
    off = hdppo.train("grid", tiny | {"steps": 320}, out=tmp_path / "off")
    on = hdppo.train("grid", tiny | EVAL | {"steps": 320, "eval_every": 64}, out=tmp_path / "on")
    assert len(read_csv(on, "eval")) == 5
    for layer in ("high", "mid", "low"):
        a, b = (load_file(str(r / "checkpoints" / layer / "tensors.safetensors")) for r in (off, on))
        assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a), layer
        rows_off, rows_on = read_csv(off, layer), read_csv(on, layer)
        assert [r["loss"] for r in rows_off] == [r["loss"] for r in rows_on]


@pytest.mark.parametrize("key, value", [("eval_every", -1), ("eval_episodes", 0), ("eval_metric", "win"),
                                        ("eval_metric", "return/")])
def test_bad_eval_keys_are_refused(tmp_path, tiny, key, value):
    with pytest.raises(ConfigError, match=f"for '{key}' is out of range") as info:
        hdppo.train("grid", tiny | {"steps": 64, key: value}, layers="low", out=tmp_path / "r")
    assert key in info.value.fix and not (tmp_path / "r").exists()


def test_an_eval_metric_of_no_layer_is_refused_before_the_run_folder(tmp_path, tiny):
    with pytest.raises(ConfigError, match="names layer 'top', which this scenario does not have"):
        hdppo.train("grid", tiny | EVAL | {"steps": 64, "eval_metric": "return/top"}, layers="low",
                    out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_a_run_without_best_says_how_to_get_one(tmp_path, tiny, capsys):
    run = hdppo.train("grid", tiny | {"steps": 64}, layers="low", out=tmp_path / "r")
    with pytest.raises(ConfigError, match="has no best checkpoint") as info:
        hdppo.load(run, checkpoint="best")
    assert "eval_every" in info.value.fix
    rc, _, err = cli(capsys, "eval", run, "--checkpoint", "best")
    assert rc != 0 and "has no best checkpoint" in err


def test_a_crash_while_writing_best_leaves_the_previous_best_whole(tmp_path, tiny, monkeypatch):
    run = hdppo.train("grid", tiny | {"steps": 128, "checkpoint_every": 1}, layers="low", out=tmp_path / "r")
    old, new = (open_commit(run, n) for n in list_commits(run)[-2:])
    write_best(run, old, {"metric": "return/high", "score": 1.0, "commit": old.number})

    def crash(*args):
        raise OSError("killed")
    monkeypatch.setattr("hdppo.engine.commit._point", crash)
    with pytest.raises(OSError, match="killed"):
        write_best(run, new, {"metric": "return/high", "score": 2.0, "commit": new.number})
    assert read_best(run)["commit"] == old.number and len(list((run / BEST_STORE).iterdir())) == 2
    recover(run)                                               # a resume cleans the unreferenced copy
    assert [p.name for p in (run / BEST_STORE).iterdir()] == [(run / BEST).resolve().name]
    assert (run / BEST / "low" / "tensors.safetensors").read_bytes() == \
        (old.path / "low" / "tensors.safetensors").read_bytes()


def test_a_stop_from_the_eval_at_a_stage_end_is_committed(tmp_path, tiny):
    rec = Evals(stop_at=1)
    run = hdppo.train("grid", tiny | {"steps": 320, "eval_every": 150, "eval_episodes": 2, "schedule": "bottom-up"},
                      layers="low,mid", out=tmp_path / "r", callbacks=[rec])
    assert [(e.env_steps, e.stage) for e in rec.events] == [(160, "bottom-up:low")]   # the first stage's end
    state = json.loads((run / "state.json").read_text())
    assert state["stage"] == 1 and state["eval_steps"] == 160 and not state["finished"]
    Trainer(RunSpec.from_run(run), resume=True).run()
    assert steps_of(run) == [160, 320]
