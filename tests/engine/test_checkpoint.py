"""Tests for hdppo.engine.checkpoint: round trips, Adam exactness, corruption, atomic replace."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from hdppo.engine import checkpoint as ck
from hdppo.engine.checkpoint import (
    CheckpointError,
    check_compatible,
    load_checkpoint,
    load_module_state,
    load_optimizer_state,
    module_state,
    optimizer_state,
    save_checkpoint,
)


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(3, 4, generator=g),
        "b": torch.arange(5, dtype=torch.int64),
        "c": torch.tensor(2.5, dtype=torch.float64),
    }


def _saved(tmp_path: Path) -> Path:
    return save_checkpoint(tmp_path / "ckpt", _tensors(), {"version": 7, "obs_dim": 12})


def test_round_trip(tmp_path: Path) -> None:
    meta = {"version": 3, "layer": "low", "space": [1, 2], "nested": {"x": 1.5}}
    out = save_checkpoint(tmp_path / "run" / "low" / "latest", _tensors(), meta)
    assert out == tmp_path / "run" / "low" / "latest"
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "tensors.safetensors"]
    tensors, got = load_checkpoint(out)
    assert got == meta
    for k, v in _tensors().items():
        assert tensors[k].dtype == v.dtype
        assert torch.equal(tensors[k], v)
    doc = json.loads((out / "meta.json").read_text())
    assert doc["format_version"] == ck.FORMAT_VERSION
    assert len(doc["tensors_sha256"]) == 64
    # no temporary or old siblings left behind
    assert [p.name for p in out.parent.iterdir()] == ["latest"]


def test_shared_storage_tensors_are_saved(tmp_path: Path) -> None:
    w = torch.randn(4, 4)
    save_checkpoint(tmp_path / "c", {"w": w, "w_tied": w, "row": w[1]}, {})
    tensors, _ = load_checkpoint(tmp_path / "c")
    assert torch.equal(tensors["w_tied"], w) and torch.equal(tensors["row"], w[1])


def test_replace_existing(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    save_checkpoint(path, {"z": torch.zeros(2)}, {"version": 8})
    tensors, meta = load_checkpoint(path)
    assert list(tensors) == ["z"] and meta == {"version": 8}
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_refuses_to_replace_non_checkpoint_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        save_checkpoint(run, _tensors(), {})
    assert (run / "notes.txt").read_text() == "keep me"


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 5, generator=g)
    y = torch.randn(16, 3, generator=g)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


def _model_opt() -> tuple[torch.nn.Module, torch.optim.Adam]:
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.8, 0.95), eps=1e-6)
    return model, opt


def test_adam_round_trip_is_bitwise_exact(tmp_path: Path) -> None:
    ref_model, ref_opt = _model_opt()
    model, opt = _model_opt()
    for s in range(3):
        _train_step(ref_model, ref_opt, s)
        _train_step(model, opt, s)
    for group in (ref_opt.param_groups[0], opt.param_groups[0]):
        group["lr"] = 1.2345e-3  # a decayed learning rate must survive too

    opt_tensors, opt_meta = optimizer_state(opt)
    assert {"optim.state.0.exp_avg", "optim.state.0.exp_avg_sq", "optim.state.0.step"} <= set(
        opt_tensors
    )
    save_checkpoint(tmp_path / "c", {**module_state(model), **opt_tensors}, {"optimizer": opt_meta})
    del model, opt

    tensors, meta = load_checkpoint(tmp_path / "c")
    torch.manual_seed(99)  # fresh, different initialisation
    new_model = torch.nn.Sequential(
        torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
    )
    new_opt = torch.optim.Adam(new_model.parameters(), lr=1.0)
    load_module_state(new_model, tensors)
    load_optimizer_state(new_opt, tensors, meta["optimizer"])
    assert new_opt.param_groups[0]["betas"] == (0.8, 0.95)
    assert new_opt.param_groups[0]["lr"] == 1.2345e-3

    for s in range(3, 8):
        _train_step(ref_model, ref_opt, s)
        _train_step(new_model, new_opt, s)
    for a, b in zip(ref_model.parameters(), new_model.parameters()):
        assert torch.equal(a, b)


def test_module_and_optimizer_mismatch_refused() -> None:
    model, opt = _model_opt()
    _train_step(model, opt, 0)
    tensors = {**module_state(model), **optimizer_state(opt)[0]}
    opt_meta = optimizer_state(opt)[1]
    other = torch.nn.Sequential(torch.nn.Linear(5, 9), torch.nn.Tanh(), torch.nn.Linear(9, 3))
    with pytest.raises(CheckpointError, match="does not match the policy network"):
        load_module_state(other, tensors)
    other_opt = torch.optim.Adam(other.parameters())
    with pytest.raises(CheckpointError, match="param groups"):
        load_optimizer_state(other_opt, tensors, opt_meta)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(CheckpointError, match="'Adam'"):
        load_optimizer_state(sgd, tensors, opt_meta)


@pytest.mark.parametrize("damage", ["flip", "truncate", "bad_json", "missing_tensors",
                                    "missing_meta", "version", "not_hdppo"])
def test_corruption_refused(tmp_path: Path, damage: str) -> None:
    path = _saved(tmp_path)
    tfile, mfile = path / "tensors.safetensors", path / "meta.json"
    if damage == "flip":
        data = bytearray(tfile.read_bytes())
        data[len(data) - 3] ^= 0x01
        tfile.write_bytes(bytes(data))
    elif damage == "truncate":
        tfile.write_bytes(tfile.read_bytes()[:-10])
    elif damage == "bad_json":
        mfile.write_text(mfile.read_text()[:-5])
    elif damage == "missing_tensors":
        tfile.unlink()
    elif damage == "missing_meta":
        mfile.unlink()
    elif damage == "version":
        doc = json.loads(mfile.read_text())
        doc["format_version"] = ck.FORMAT_VERSION + 1
        mfile.write_text(json.dumps(doc))
    elif damage == "not_hdppo":
        mfile.write_text("[1, 2]")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    msg = str(info.value)
    assert str(path) in msg
    if damage in ("flip", "truncate"):
        assert "sha256 mismatch" in msg and "--load" in msg
    if damage == "version":
        assert "upgrade hdppo" in msg


def test_missing_path_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist") as info:
        load_checkpoint(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not a directory"):
        load_checkpoint(tmp_path / "file")


def test_failure_while_writing_keeps_previous(tmp_path: Path, monkeypatch) -> None:
    path = _saved(tmp_path)
    real = ck._write_bytes

    def failing(p: Path, data: bytes) -> None:
        if p.name == "meta.json":
            raise OSError("disk full")
        real(p, data)

    monkeypatch.setattr(ck, "_write_bytes", failing)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"new": torch.ones(3)}, {"version": 8})
    tensors, meta = load_checkpoint(path)
    assert meta["version"] == 7 and torch.equal(tensors["a"], _tensors()["a"])
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # temp dir cleaned up


def test_failure_while_renaming_keeps_previous(tmp_path: Path, monkeypatch) -> None:
    path = _saved(tmp_path)
    real = ck.os.rename
    calls = []

    def failing(src, dst) -> None:
        calls.append((Path(src).name, Path(dst).name))
        if Path(src).name.startswith(".ckpt.tmp-"):
            raise OSError("rename failed")
        real(src, dst)

    monkeypatch.setattr(ck.os, "rename", failing)
    with pytest.raises(OSError, match="rename failed"):
        save_checkpoint(path, {"new": torch.ones(3)}, {"version": 8})
    monkeypatch.setattr(ck.os, "rename", real)
    assert len(calls) == 3  # aside, (failed) in, back
    _, meta = load_checkpoint(path)
    assert meta["version"] == 7
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_interrupted_save_hint(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    path.rename(tmp_path / ".ckpt.old-123-abcd")  # as if the process died mid-replace
    with pytest.raises(CheckpointError, match=r"\.ckpt\.old-123-abcd"):
        load_checkpoint(path)


def test_no_pickle(tmp_path: Path, monkeypatch) -> None:
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "dumps", forbidden)
    monkeypatch.setattr(pickle, "dump", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(torch, "save", forbidden)
    model, opt = _model_opt()
    _train_step(model, opt, 0)
    t, m = optimizer_state(opt)
    save_checkpoint(tmp_path / "c", {**module_state(model), **t}, {"optimizer": m})
    tensors, meta = load_checkpoint(tmp_path / "c")
    load_module_state(model, tensors)
    load_optimizer_state(opt, tensors, meta["optimizer"])


def test_check_compatible() -> None:
    meta = {"obs_dim": 12, "action_space": ["Discrete", 5], "layer": "low"}
    check_compatible(meta, {"obs_dim": 12, "action_space": ("Discrete", 5)}, "checkpoint x")
    with pytest.raises(CheckpointError) as info:
        check_compatible(
            meta,
            {"obs_dim": 14, "action_space": ["Discrete", 5], "goal_dim": 3},
            "checkpoint runs/x/low/latest",
        )
    msg = str(info.value)
    assert "checkpoint runs/x/low/latest" in msg
    assert "obs_dim: checkpoint has 12, expected 14" in msg
    assert "goal_dim: missing" in msg
    assert "action_space" not in msg
    assert "retrain" in msg


def test_meta_must_be_json(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="JSON"):
        save_checkpoint(tmp_path / "c", {}, {"bad": object()})
    assert not (tmp_path / "c").exists()
