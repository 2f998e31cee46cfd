"""Damaged or tampered run folders (issue 25, item 7): each is one line naming the file and the fix,
never a traceback, and nothing is created or read outside the run folder.

Before: a truncated or key-less config.json, a meta.json without `policy`, garbage in a metrics
CSV, bad types in state.json, a folder `commits/²` all ended in tracebacks (JSONDecodeError,
KeyError, UnicodeDecodeError, ValueError, TypeError); `hidden=[1e7, 1e7]` in meta.json tried to
allocate 400 TB; a manifest layer `../../../escape` was read (and carried into the next commit)
outside the run; an 8 GiB tensors file was read whole before its hash was checked (MemoryError)."""
from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hdppo.engine.checkpoint import CheckpointError
from hdppo.errors import HdppoError
from tests.helpers import TINY_CLI
from tests.helpers.cli import cli

TINY_TRAIN = TINY_CLI
NEWEST = Path("commits") / "000001"


pytestmark = pytest.mark.usefixtures("wide_console")      # rich tables keep one line per row


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A tiny finished grid run: commit 0 (the start) and commit 1 (every layer)."""
    from hdppo.cli import main
    out = tmp_path_factory.mktemp("tampered") / "run"
    assert main(["train", "grid", *TINY_TRAIN, "--steps", "256", "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "commits").iterdir()) == ["000000", "000001"]
    return out


def copy(base: Path, tmp_path: Path) -> Path:
    return shutil.copytree(base, tmp_path / "run", symlinks=True)


def rehash(run: Path, rel: str) -> None:
    """Make the newest commit's manifest agree with an edited file (a deliberate tamper, not bit rot)."""
    c = run / NEWEST
    m = json.loads((c / "manifest.json").read_text())
    m["files"][rel] = hashlib.sha256((c / rel).read_bytes()).hexdigest()
    m.get("sizes", {})[rel] = (c / rel).stat().st_size
    (c / "manifest.json").write_text(json.dumps(m))


def one_line(rc: int, err: str, *names: str) -> str:
    assert rc == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("hdppo: error:")]
    assert len(errors) == 1, err
    assert any(line.strip().startswith("fix:") for line in err.splitlines()), err
    for name in names:
        assert name in errors[0], (name, err)
    return errors[0]


READERS = {
    "eval": lambda run, tmp: ["eval", run, "--episodes", "1"],
    "export": lambda run, tmp: ["export", run, "--format", "torchscript", "--out", tmp / "export"],
    "plot": lambda run, tmp: ["plot", run, "--out", tmp / "curves.png"],
    "resume": lambda run, tmp: ["train", "--resume", run, "--steps", "320"],
}


def load_error(run: Path) -> str:
    import hdppo
    with pytest.raises((HdppoError, CheckpointError)) as caught:
        hdppo.load(run)
    return str(caught.value)


# ---- config.json ---------------------------------------------------------------------------------
CONFIGS = {
    "truncated": lambda text: text[: len(text) // 2],
    "not an object": lambda text: "[1, 2]",
    "no train": lambda text: _without(text, "train"),
    "no layer_names": lambda text: _without(text, "layer_names"),
    "no scenario": lambda text: _without(text, "scenario"),
    "no layers": lambda text: _without(text, "layers"),
    "no scenario_overrides": lambda text: _without(text, "scenario_overrides"),
    "no frozen": lambda text: _without(text, "frozen"),
    "a train value of the wrong type": lambda text: _with(text, "train", {**json.loads(text)["train"], "steps": [1]}),
    "a layer setting of the wrong type": lambda text: _with(text, "train", {**json.loads(text)["train"],
                                                                            "layers": {"low": {"hidden": "wide"}}}),
    "train is a string": lambda text: _with(text, "train", "fast"),
    "a layer name that climbs out": lambda text: _with(text, "layer_names", ["high", "mid", "../../escape"]),
}


def _without(text: str, key: str) -> str:
    c = json.loads(text)
    c.pop(key)
    return json.dumps(c)


def _with(text: str, key: str, value) -> str:
    return json.dumps({**json.loads(text), key: value})


@pytest.mark.parametrize("damage", sorted(CONFIGS))
def test_a_damaged_config_is_one_line(damage, base, tmp_path, capsys):
    run = copy(base, tmp_path)
    path = run / "config.json"
    path.write_text(CONFIGS[damage](path.read_text()))
    for command, args in READERS.items():
        rc, _, err = cli(capsys, *args(run, tmp_path))
        if rc == 0 and command == "plot" and damage not in ("truncated", "not an object", "no layer_names",
                                                             "a layer name that climbs out"):
            continue                                   # plot needs none of the others: it draws
        one_line(rc, err, str(path))
    assert str(path) in load_error(run)
    assert not (tmp_path / "escape").exists()


# ---- meta.json -----------------------------------------------------------------------------------
def _edit_meta(run: Path, edit) -> Path:
    path = run / NEWEST / "low" / "meta.json"
    doc = json.loads(path.read_text())
    edit(doc["meta"])
    path.write_text(json.dumps(doc))
    rehash(run, "low/meta.json")
    return path


METAS = {         # (the edit, what the error line says)
    "no policy": (lambda meta: meta.pop("policy"), "no policy entry"),
    "policy is a list": (lambda meta: meta.__setitem__("policy", [1]), "no policy entry"),
    "hidden 1e7 x 1e7": (lambda meta: meta["policy"].__setitem__("hidden", [10**7, 10**7]),
                         "no tensor has a dimension of 10,000,000"),
    "hidden not numbers": (lambda meta: meta["policy"].__setitem__("hidden", ["a", None]), "hidden ['a', None]"),
    "hidden negative": (lambda meta: meta["policy"].__setitem__("hidden", [-4, 32]), "hidden [-4, 32]"),
    "unknown activation": (lambda meta: meta["policy"].__setitem__("activation", "swish9"), "activation 'swish9'"),
}


@pytest.mark.parametrize("damage", sorted(METAS))
def test_a_tampered_meta_is_refused_before_anything_is_built(damage, base, tmp_path, capsys):
    run = copy(base, tmp_path)
    edit, says = METAS[damage]
    path = _edit_meta(run, edit)
    shown = run / "checkpoints" / "low"                 # what readers load: the newest commit, through the link
    for command in ("eval", "export"):
        rc, _, err = cli(capsys, *READERS[command](run, tmp_path))
        line = one_line(rc, err, "meta.json", says)
        assert str(shown) in line or str(path) in line, line
    assert says in load_error(run)


# ---- metrics CSVs --------------------------------------------------------------------------------
CSVS = {
    "binary": b"step,\x00\x00garbage\n\xff\xfe,1,2\n",
    "text": b"step,wall_time,return\nabc,def,1\n",
}


@pytest.mark.parametrize("damage", sorted(CSVS))
def test_garbage_in_a_metrics_csv_is_one_line(damage, base, tmp_path, capsys):
    run = copy(base, tmp_path)
    path = run / "metrics" / "low.csv"
    path.write_bytes(CSVS[damage])
    before = path.read_bytes()
    rc, _, err = cli(capsys, *READERS["plot"](run, tmp_path))
    one_line(rc, err, str(path))
    rc, _, err = cli(capsys, *READERS["resume"](run, tmp_path))
    one_line(rc, err, str(path))
    assert path.read_bytes() == before                  # refused before anything was cut


# ---- state.json ----------------------------------------------------------------------------------
STATES = {
    "env_steps text": {"env_steps": "abc"},
    "stage a list": {"stage": [1]},
    "stage_steps null": {"stage_steps": None},
    "worker_steps text": {"worker_steps": "xy"},
    "env_steps negative": {"env_steps": -5},
    "stage past the end": {"stage": 99},
    "finished a string": {"finished": "no"},
    "not an object": [1, 2],
}


@pytest.mark.parametrize("damage", sorted(STATES))
def test_bad_types_in_state_json_are_one_line(damage, base, tmp_path, capsys):
    run = copy(base, tmp_path)
    path = run / NEWEST / "state.json"
    bad = STATES[damage]
    state = bad if isinstance(bad, list) else {**json.loads(path.read_text()), **bad}
    path.write_text(json.dumps(state))
    rehash(run, "state.json")
    rc, _, err = cli(capsys, *READERS["resume"](run, tmp_path))
    line = one_line(rc, err, "state.json", *(k for k in ("env_steps", "stage", "worker_steps", "finished")
                                                if k in str(bad)))
    assert "000001" in line and "000000" in err            # names the commit, and the older one to resume from


# ---- commits/ and the manifest -------------------------------------------------------------------
def test_a_folder_that_only_looks_like_a_commit_number_is_not_one(base, tmp_path, capsys):
    run = copy(base, tmp_path)
    for name in ("²", "١٢", "0x1", " 7"):                   # isdigit() is true for the first two
        (run / "commits" / name).mkdir()
    rc, _, err = cli(capsys, *READERS["resume"](run, tmp_path))
    assert rc == 0 and "Traceback" not in err, err
    assert (run / "commits" / "²").is_dir()                 # not ours: left alone


def _watch_outside(monkeypatch, outside: Path) -> list[str]:
    """Every open, mkdir, link or copy of a path under `outside`, made by this process."""
    seen: list[str] = []

    root = os.path.realpath(outside)

    def note(path) -> None:               # lexically: no system call here (the watched ones are patched)
        try:
            full = os.path.normpath(os.path.join(os.getcwd(), os.fsdecode(path)))
        except TypeError:                 # a file descriptor
            return
        if full == root or full.startswith(root + os.sep):
            seen.append(full)

    def wrap(module, name):
        real = getattr(module, name)

        def watched(path, *a, **k):
            note(path)
            return real(path, *a, **k)
        monkeypatch.setattr(module, name, watched)
    for module, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "mkdir"), (os, "stat")):
        wrap(module, name)
    for name in ("link", "rename", "replace"):
        real2 = getattr(os, name)

        def watched2(src, dst, *a, _real=real2, **k):
            note(src)
            note(dst)
            return _real(src, dst, *a, **k)
        monkeypatch.setattr(os, name, watched2)
    return seen


@pytest.mark.parametrize("listed", [False, True], ids=["layer only", "layer and its files"])
def test_a_manifest_layer_that_climbs_out_is_refused(listed, base, tmp_path, capsys, monkeypatch):
    run = copy(base, tmp_path)
    outside = tmp_path / "escape"
    c = run / NEWEST
    m = json.loads((c / "manifest.json").read_text())
    m["layers"].append("../../../escape")
    if listed:                            # files that exist out there, with their true hashes
        shutil.copytree(c / "low", outside)
        for name in ("meta.json", "tensors.safetensors"):
            m["files"][f"../../../escape/{name}"] = hashlib.sha256((outside / name).read_bytes()).hexdigest()
    (c / "manifest.json").write_text(json.dumps(m))
    before = sorted(p.name for p in tmp_path.iterdir())
    seen = _watch_outside(monkeypatch, outside)
    rc, _, err = cli(capsys, *READERS["resume"](run, tmp_path))
    monkeypatch.undo()
    one_line(rc, err, "manifest.json", "../../../escape")
    assert not seen, seen
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# ---- a huge tensors file -------------------------------------------------------------------------
def _limited(args: list, limit: int) -> subprocess.CompletedProcess:
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return subprocess.run([sys.executable, "-c", "\n".join(args)], capture_output=True, text=True, timeout=300,
                          preexec_fn=cap)


def test_an_8_gib_tensors_file_is_refused_without_reading_it(base, tmp_path, capsys):
    run = copy(base, tmp_path)
    path = run / NEWEST / "low" / "tensors.safetensors"
    with open(path, "r+b") as f:                              # sparse: no disk used
        f.truncate(8 << 30)
    limit = 3 << 30                                           # far below 8 GiB, far above what eval needs
    eval_ = _limited(["import sys", "from hdppo.cli import main",
                      f"sys.exit(main(['eval', {str(run)!r}, '--episodes', '1']))"], limit)
    one_line(eval_.returncode, eval_.stderr, "tensors.safetensors")
    load = _limited(["import hdppo", "from hdppo.engine.checkpoint import CheckpointError",
                     "from hdppo.errors import HdppoError",
                     "try:", f"    hdppo.load({str(run)!r})",
                     "except (HdppoError, CheckpointError) as e:", "    print('refused:', e)"], limit)
    assert load.returncode == 0 and "refused:" in load.stdout and "tensors.safetensors" in load.stdout, load
    assert "Traceback" not in load.stderr, load.stderr
    rc, _, err = cli(capsys, *READERS["resume"](run, tmp_path))
    one_line(rc, err, "tensors.safetensors")
