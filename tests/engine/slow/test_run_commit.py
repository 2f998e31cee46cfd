"""The run commit and resume (issue 13), in-process on tiny inline grid runs: a resume never
re-initialises a trained layer silently, refuses damaged commits naming the layer and an older
commit that works, keeps update counts of an uninterrupted run, cuts metrics back to the commit,
cleans leftovers, and refuses a --resume that would do nothing or ignore what it was given.
The kill/SIGTERM/hang/disk-full faults run in real processes in tests/faults/."""
from __future__ import annotations

import csv
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hdppo.engine.checkpoint import load_checkpoint
from tests.helpers.cli import cli


def list_commits(run: Path) -> list[int]:
    from hdppo.engine.commit import list_commits as listed  # imported late: the file also runs on older hdppo
    return listed(run)


def open_commit(run: Path, n: int):
    from hdppo.engine.commit import open_commit as opened
    return opened(run, n)

FAST = ["--backend", "inline", "--workers", "1", "--seed", "0", "--no-progress", "envs_per_worker=2",
        "epochs=1", "minibatches=1"]
# low and mid update every 16 / 32 env steps per copy; high keeps its default (256 env steps per copy),
# so a short run ends with the commander part-way through a rollout
PHASED = ["low.rollout=16", "mid.rollout=32"]


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def column(run: Path, layer: str, key: str) -> list[float]:
    return [float(r[key]) for r in rows(run / "metrics" / f"{layer}.csv")]


def newest(run: Path):
    return open_commit(run, list_commits(run)[-1])


@pytest.fixture(scope="module")
def three_layer_run(tmp_path_factory) -> Path:
    """grid, all layers, a commit after every update (checkpoint_every=1): several commits to choose from."""
    out = tmp_path_factory.mktemp("commit") / "run"
    from hdppo.cli import main
    assert main(["train", "grid", "--layer", "all", "--steps", "640", *FAST, *PHASED, "checkpoint_every=1",
                 "--out", str(out)]) == 0
    return out


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def assert_refused(rc: int, err: str, *names: str) -> None:
    assert rc == 2, err
    err = "\n".join(line for line in err.splitlines() if not line.startswith("hdppo: warning:"))
    assert err.startswith("hdppo: error:") and "Traceback" not in err, err
    for name in names:
        assert name.lower() in err.lower(), f"{name!r} not in {err!r}"
    assert "fix:" in err, err


# ---- the commit on disk --------------------------------------------------------------------------
def test_a_commit_names_every_file_with_its_hash_and_checkpoints_point_at_the_newest(three_layer_run):
    run = three_layer_run
    c = newest(run)
    assert c.layers == ["high", "low", "mid"]
    assert set(c.manifest["files"]) == {"state.json"} | {f"{n}/{f}" for n in c.layers
                                                         for f in ("tensors.safetensors", "meta.json")}
    assert (run / "checkpoints").resolve() == c.path.resolve()
    assert len(list_commits(run)) == 3                   # older ones pruned
    state = c.state()
    assert state["finished"] is True and state["env_steps"] == c.env_steps
    # the state and the layers agree: every layer's version equals the last row of its CSV
    for layer in c.layers:
        _, meta = load_checkpoint(c.layer_dir(layer))
        assert meta["version"] == column(run, layer, "version")[-1]
        assert meta["env_steps"] == state["env_steps"]
    assert c.manifest["metrics_rows"]["low.csv"] == len(rows(run / "metrics" / "low.csv"))


# ---- 1. resume never re-initialises a layer silently ---------------------------------------------
@pytest.mark.parametrize("damage", ["delete_meta", "edit_meta", "delete_layer"])
def test_a_damaged_layer_is_refused_naming_it_and_an_older_commit(damage, three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    c = newest(run)
    layer_dir = c.layer_dir("high")
    if damage == "delete_meta":
        (layer_dir / "meta.json").unlink()
    elif damage == "edit_meta":
        doc = json.loads((layer_dir / "meta.json").read_text())
        doc["meta"]["version"] = "abc"
        (layer_dir / "meta.json").write_text(json.dumps(doc))
    else:
        shutil.rmtree(layer_dir)
    older = list_commits(run)[-2]
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "1000")
    assert_refused(rc, err, "layer 'high'", f"{older:06d}", "--reinit high")
    assert json.loads((run / "config.json").read_text())["train"]["steps"] == 640      # nothing rewritten
    # the fix it names works: the older commit is whole
    shutil.move(str(c.path), str(tmp_path / "aside"))
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "1000")
    assert rc == 0, err


def test_reinit_recreates_only_the_named_layer(three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    c = newest(run)
    (c.layer_dir("high") / "meta.json").unlink()
    low_before = load_checkpoint(c.layer_dir("low"))[1]["version"]
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "704", "--reinit", "high")
    assert rc == 0, err
    assert "--reinit high" in err                                 # said, not silent
    _, high = load_checkpoint(run / "checkpoints" / "high")
    _, low = load_checkpoint(run / "checkpoints" / "low")
    assert low["version"] > low_before                           # continued
    assert high["version"] < low_before                          # started again from version 0


def test_a_hand_edited_layer_field_is_refused_even_with_a_matching_manifest(three_layer_run, tmp_path, capsys):
    from hdppo.engine.commit import sha256_file
    run = copy_run(three_layer_run, tmp_path / "run")
    c = newest(run)
    meta_path = c.layer_dir("mid") / "meta.json"
    doc = json.loads(meta_path.read_text())
    doc["meta"]["layer"] = "low"
    meta_path.write_text(json.dumps(doc))
    manifest = dict(c.manifest)
    manifest["files"]["mid/meta.json"] = sha256_file(meta_path)
    (c.path / "manifest.json").write_text(json.dumps(manifest))
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "1000")
    assert_refused(rc, err, "records layer 'low'", "--reinit mid")


def test_malformed_meta_with_a_matching_manifest_is_one_line(three_layer_run, tmp_path, capsys):
    from hdppo.engine.commit import sha256_file
    run = copy_run(three_layer_run, tmp_path / "run")
    c = newest(run)
    meta_path = c.layer_dir("low") / "meta.json"
    doc = json.loads(meta_path.read_text())
    del doc["meta"]["optimizer"]
    meta_path.write_text(json.dumps(doc))
    c.manifest["files"]["low/meta.json"] = sha256_file(meta_path)
    (c.path / "manifest.json").write_text(json.dumps(c.manifest))
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "1000")
    assert_refused(rc, err, "malformed meta.json", "low")


# ---- 3. metrics never repeat a step --------------------------------------------------------------
def test_resume_cuts_metrics_written_after_the_commit(three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    c = newest(run)
    # what a kill after the commit leaves: rows past it, and a CSV the commit never saw
    with open(run / "metrics" / "low.csv", "a", newline="") as f:
        csv.writer(f).writerow([c.env_steps + 32, 0.0] + ["1"] * (len(rows(run / "metrics" / "low.csv")[0]) - 2))
    (run / "metrics" / "extra.csv").write_text("step,wall_time,x\n1,0.0,1\n")
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "768")
    assert rc == 0, err
    assert not (run / "metrics" / "extra.csv").exists()
    for layer in ("low", "mid", "high"):
        steps = column(run, layer, "step")
        versions = column(run, layer, "version")
        assert steps == sorted(set(steps)), layer              # no step twice, never backwards
        assert all(a < b for a, b in itertools.pairwise(versions)), layer


# ---- 7. resume keeps the rollout phase -----------------------------------------------------------
def test_resumed_run_gives_every_layer_the_updates_of_an_uninterrupted_one(tmp_path, capsys):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert cli(capsys, "train", "grid", "--layer", "all", "--steps", "1536", *FAST, *PHASED, "--out", whole)[0] == 0
    assert cli(capsys, "train", "grid", "--layer", "all", "--steps", "700", *FAST, *PHASED, "--out", split)[0] == 0
    part = {n: len(rows(split / "metrics" / f"{n}.csv")) for n in ("low", "mid", "high")}
    rc, _, err = cli(capsys, "train", "--resume", split, "--steps", "1536")
    assert rc == 0, err
    for layer in ("low", "mid", "high"):
        assert column(split, layer, "step") == column(whole, layer, "step"), layer      # same env steps
        assert column(split, layer, "version") == column(whole, layer, "version"), layer
    assert part["high"] == 1 and len(rows(whole / "metrics" / "high.csv")) == 3   # the case that lost updates


# ---- 8. resumes that would do nothing or ignore what they were given -----------------------------
def test_resume_with_fewer_steps_than_done_is_refused(three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "100")
    assert_refused(rc, err, "fewer than", "hdppo eval")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before       # nothing rewritten


@pytest.mark.parametrize("extra", [["grid"], ["lr=1e-3"], ["--seed", "3"], ["--backend", "process"]])
def test_resume_refuses_what_it_would_ignore(extra, three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    rc, _, err = cli(capsys, "train", *extra[:1] if extra == ["grid"] else [], "--resume", run,
                     *([] if extra == ["grid"] else extra))
    assert_refused(rc, err, "--resume", "ignored")


def test_negative_seed_is_a_config_error_not_a_scenario_bug(tmp_path, capsys):
    rc, _, err = cli(capsys, "train", "grid", "--steps", "64", *FAST[:4], "--seed", "-1", "--out", tmp_path / "r")
    assert_refused(rc, err, "'seed'", ">= 0")
    assert "scenario" not in err.lower()
    assert not (tmp_path / "r").exists()


def test_resume_removes_leftovers_of_interrupted_commits(three_layer_run, tmp_path, capsys):
    run = copy_run(three_layer_run, tmp_path / "run")
    leftovers = [run / "commits" / ".tmp-000099-1-abc", run / ".checkpoints.old-1-abc", run / "state.tmp",
                 run / "metrics" / "low.csv.tmp"]
    leftovers[0].mkdir()
    (leftovers[0] / "state.json").write_text("{}")
    shutil.copytree(newest(run).path, leftovers[1])
    leftovers[2].write_text("{}")
    leftovers[3].write_text("x")
    rc, _, err = cli(capsys, "train", "--resume", run, "--steps", "704")
    assert rc == 0, err
    assert not any(p.exists() for p in leftovers)


def test_eval_and_load_read_the_newest_commit(three_layer_run, tmp_path, capsys):
    rc, out, err = cli(capsys, "eval", three_layer_run, "--episodes", "2")
    assert rc == 0, err
    assert "return/low (checkpoint)" in out
    rc, _, err = cli(capsys, "train", "grid", "--layer", "mid", "--steps", "64", *FAST, "--load",
                     f"low={three_layer_run / 'checkpoints' / 'low'}", "--out", tmp_path / "warm")
    assert rc == 0, err


def test_resumed_servers_hold_the_commit_exactly(three_layer_run, tmp_path):
    """Weights and Adam state of every layer after a resume are bit-identical to the commit's."""
    from hdppo.engine.config import train_config_from_dict
    from hdppo.engine.server import ParameterServer
    from hdppo.engine.spec import RunSpec
    from hdppo.engine.trainer import Trainer
    from hdppo.runtime.evaluate import load_run_config
    run = copy_run(three_layer_run, tmp_path / "run")
    config = load_run_config(run)
    tc = train_config_from_dict(config["train"])
    t = Trainer(RunSpec(config["scenario"], config["scenario_overrides"], tc, config["layers"], {}, run),
                resume=True)
    for layer in t.commit.layers:
        i = t.names.index(layer)
        server = ParameterServer(t.infos[i], tc.layers[layer], seed=99, device="cpu")
        t._restore(server, layer)
        tensors, meta = load_checkpoint(t.commit.layer_dir(layer))
        got, got_meta = server.state()
        assert set(got) == set(tensors)
        for k in tensors:
            assert np.array_equal(got[k].numpy(), tensors[k].numpy()), (layer, k)
        assert got_meta["version"] == meta["version"] and got_meta["progress"] == meta["progress"]
        assert server._rng.bit_generator.state == meta["rng"]
