"""Checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint is a directory holding ``tensors.safetensors`` and ``meta.json``. It is written
into a temporary sibling directory and renamed into place, so a crash never leaves a
half-written checkpoint under the target path.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as _st_load
from safetensors.torch import save as _st_save

FORMAT_NAME = "hdppo-checkpoint"
FORMAT_VERSION = 1
TENSORS_FILE = "tensors.safetensors"
META_FILE = "meta.json"
MODEL_PREFIX = "model."
OPTIM_PREFIX = "optim."

_FIX_CORRUPT = "re-run training or point --load at another checkpoint"
# optimizer state entries that must have their parameter's shape
_PARAM_SHAPED = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"}


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt, from another format version, or incompatible."""


# ---------------------------------------------------------------------------------------------
# writing


def _fsync_dir(directory: Path) -> None:
    """Flush a directory entry to disk where the platform allows it."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _is_replaceable(path: Path) -> bool:
    """True when ``path`` looks like a checkpoint directory (or an empty one)."""
    if not path.is_dir() or path.is_symlink():
        return False
    return all(p.name in (TENSORS_FILE, META_FILE) for p in path.iterdir())


def save_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict) -> Path:
    """Atomically write a checkpoint directory at ``path``; returns the path.

    ``meta`` must be JSON-serialisable (tuples come back as lists). An existing checkpoint at
    ``path`` is replaced only once the new one is fully on disk; a path that exists but is not
    a checkpoint directory is refused with CheckpointError.
    """
    path = Path(path)
    if path.exists() and not _is_replaceable(path):
        raise CheckpointError(
            f"refusing to save checkpoint at {path}: it exists and is not a checkpoint directory "
            f"(only {TENSORS_FILE} and {META_FILE} are expected inside); choose another path"
        )
    for name, t in tensors.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise TypeError(f"checkpoint {path}: tensors must map str to torch.Tensor, got {name!r}")
    # Clone so tensors that share storage (tied weights) can be serialised independently.
    flat = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    blob = _st_save(flat)
    digest = hashlib.sha256(blob).hexdigest()
    try:
        meta_text = json.dumps(
            {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "tensors_sha256": digest,
                "tensors_bytes": len(blob),
                "tensor_count": len(flat),
                "meta": meta,
            },
            indent=2,
            sort_keys=True,
        )
    except (TypeError, ValueError) as e:
        raise TypeError(f"checkpoint {path}: meta is not JSON-serialisable: {e}") from e

    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = parent / f".{path.name}.tmp-{token}"
    tmp.mkdir()
    try:
        _write_bytes(tmp / TENSORS_FILE, blob)
        _write_bytes(tmp / META_FILE, meta_text.encode("utf-8"))
        _fsync_dir(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    if not path.exists():
        try:
            os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(parent)
        return path

    old = parent / f".{path.name}.old-{token}"
    try:
        os.rename(path, old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)  # put the previous checkpoint back
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(parent)
    shutil.rmtree(old, ignore_errors=True)
    return path


# ---------------------------------------------------------------------------------------------
# reading


def _leftover_hint(path: Path) -> str:
    """Names a previous version left aside by an interrupted save, if any."""
    if not path.parent.is_dir():
        return ""
    olds = sorted(path.parent.glob(f".{path.name}.old-*"))
    if not olds:
        return ""
    return f"; an interrupted save left the previous checkpoint at {olds[-1]} (rename it to {path})"


META_LIMIT = 16 << 20           # a meta.json larger than this is not one hdppo wrote
HEADER_LIMIT = 100 << 20        # safetensors' own bound on its JSON header


def _read_doc(path: Path) -> dict:
    """meta.json of a checkpoint folder, checked for format; CheckpointError otherwise."""
    if not path.exists():
        raise CheckpointError(
            f"checkpoint {path} does not exist; check the path given to --load"
            + _leftover_hint(path)
        )
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint {path} is not a directory (a checkpoint is a directory holding "
            f"{TENSORS_FILE} and {META_FILE}); point --load at a checkpoint directory"
        )
    for name in (META_FILE, TENSORS_FILE):
        if not (path / name).is_file():
            raise CheckpointError(
                f"checkpoint {path} is incomplete: {name} is missing; {_FIX_CORRUPT}"
            )
    if (path / META_FILE).stat().st_size > META_LIMIT:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {META_FILE} is over {META_LIMIT >> 20} MiB; {_FIX_CORRUPT}"
        )
    try:
        doc = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {META_FILE} is not valid JSON ({e}); {_FIX_CORRUPT}"
        ) from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise CheckpointError(
            f"checkpoint {path} is not an hdppo checkpoint: {META_FILE} lacks "
            f"format={FORMAT_NAME!r}; point --load at a checkpoint written by hdppo"
        )
    version = doc.get("format_version")
    if version != FORMAT_VERSION:
        fix = (
            "upgrade hdppo to read it"
            if isinstance(version, int) and version > FORMAT_VERSION
            else "re-run training with this hdppo version"
        )
        raise CheckpointError(
            f"checkpoint {path} has format version {version!r}, this hdppo reads version "
            f"{FORMAT_VERSION}; {fix}"
        )
    if not isinstance(doc.get("tensors_sha256"), str) or not isinstance(doc.get("meta"), dict):
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {META_FILE} lacks tensors_sha256 or meta; {_FIX_CORRUPT}"
        )
    return doc


def tensor_shapes(path: str | Path, expected_bytes: Any = None) -> dict[str, tuple[int, ...]]:
    """The shapes in a checkpoint's tensors file, from its safetensors header alone (nothing else is
    read). CheckpointError when the file's size is not `expected_bytes` (meta.json's record, when
    given) or not what its header describes: truncated, padded or replaced."""
    path = Path(path)
    file = path / TENSORS_FILE
    size = file.stat().st_size
    bad = f"checkpoint {path} is corrupt: {TENSORS_FILE}"
    if isinstance(expected_bytes, int) and not isinstance(expected_bytes, bool) and size != expected_bytes:
        raise CheckpointError(f"{bad} sha256 mismatch, known without reading it: it is {size:,} bytes, "
                              f"{META_FILE} records {expected_bytes:,}; {_FIX_CORRUPT}")
    with open(file, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 2 <= n <= min(HEADER_LIMIT, size - 8):
            raise CheckpointError(f"{bad} has no readable safetensors header; {_FIX_CORRUPT}")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            header = None
    shapes: dict[str, tuple[int, ...]] = {}
    end = 0
    if not isinstance(header, dict):
        raise CheckpointError(f"{bad} has no readable safetensors header; {_FIX_CORRUPT}")
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(shape, list) and all(_count(d) for d in shape) and isinstance(offsets, list)
                and len(offsets) == 2 and all(_count(o) for o in offsets)):
            raise CheckpointError(f"{bad}: the header entry of {name!r} is malformed; {_FIX_CORRUPT}")
        shapes[name] = tuple(shape)
        end = max(end, offsets[1])
    if size != 8 + n + end:
        raise CheckpointError(f"{bad} sha256 mismatch, known without reading it: it is {size:,} bytes, its "
                              f"header describes {8 + n + end:,} (truncated, padded or replaced); {_FIX_CORRUPT}")
    return shapes


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_policy_meta(path: str | Path, meta: dict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse a checkpoint whose meta `policy` (what rebuilds its network) is malformed or names sizes
    its tensors do not have, before anything is built: a hand-edited `hidden=[1e7, 1e7]` would
    otherwise allocate 400 TB."""
    from hdppo.policies.factory import POLICIES
    from hdppo.policies.mlp import ACTIVATIONS
    where = f"checkpoint {path}: {META_FILE}"
    fix = "restore the checkpoint, or point at another one (re-run training to write a new one)"
    p = meta.get("policy")
    if not isinstance(p, dict):
        raise CheckpointError(f"{where} has no policy entry (what rebuilds the layer's network); {fix}")
    hidden = p.get("hidden")
    problems = []
    if not isinstance(p.get("kind"), str) or p["kind"] not in POLICIES:
        problems.append(f"kind {p.get('kind')!r} is none of {sorted(POLICIES)}")
    if not isinstance(hidden, list) or not hidden or not all(_count(h) and h > 0 for h in hidden):
        problems.append(f"hidden {hidden!r} is not a list of sizes >= 1")
    if not isinstance(p.get("activation"), str) or p["activation"] not in ACTIVATIONS:
        problems.append(f"activation {p.get('activation')!r} is none of {list(ACTIVATIONS)}")
    if not _count(p.get("n_roles")):
        problems.append(f"n_roles {p.get('n_roles')!r} is not a count")
    for key in ("centralized", "value_norm"):
        if key in p and not isinstance(p[key], bool):
            problems.append(f"{key} {p[key]!r} is not true or false")
    if problems:
        raise CheckpointError(f"{where} has a malformed policy: {'; '.join(problems)}; {fix}")
    assert isinstance(hidden, list)
    model = [shape for name, shape in shapes.items() if name.startswith(MODEL_PREFIX)]
    dims = {d for shape in model for d in shape}
    elements = sum(math.prod(shape) for shape in model)
    missing = [h for h in hidden if h not in dims] if p["kind"] == "mlp" else [h for h in hidden if h > elements]
    needed = sum(a * b for a, b in itertools.pairwise(hidden))
    if missing or needed > elements:
        raise CheckpointError(f"{where} says hidden={hidden}, which its {TENSORS_FILE} does not hold ("
                              + (f"no tensor has a dimension of {missing[0]:,}" if missing
                                 else f"{needed:,} weights needed, {elements:,} stored") + f"); {fix}")


def inspect_checkpoint(path: str | Path, policy: bool = True) -> tuple[dict, dict[str, tuple[int, ...]]]:
    """A checkpoint's meta and tensor shapes, checked without reading its tensors: the format, the
    tensors file's size (against meta.json and its own header) and, with `policy`, the policy
    entry against the shapes. CheckpointError naming the file otherwise."""
    path = Path(path)
    doc = _read_doc(path)
    shapes = tensor_shapes(path, doc.get("tensors_bytes"))
    if policy or "policy" in doc["meta"]:
        check_policy_meta(path, doc["meta"], shapes)
    return doc["meta"], shapes


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[dict[str, torch.Tensor], dict]:
    """Read and verify a checkpoint; returns ``(tensors, meta)`` or raises CheckpointError.

    Nothing large is read before it is checked: the tensors file's size against meta.json and its
    header, then its sha256 in chunks, then the tensors; a meta `policy` is checked against the
    tensors' shapes."""
    path = Path(path)
    doc = _read_doc(path)
    expected = doc["tensors_sha256"]
    user_meta = doc["meta"]
    shapes = tensor_shapes(path, doc.get("tensors_bytes"))
    if "policy" in user_meta:
        check_policy_meta(path, user_meta, shapes)
    h = hashlib.sha256()
    with open(path / TENSORS_FILE, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    actual = h.hexdigest()
    if actual != expected:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {TENSORS_FILE} sha256 mismatch "
            f"(expected {expected[:12]}..., found {actual[:12]}...); {_FIX_CORRUPT}"
        )
    blob = (path / TENSORS_FILE).read_bytes()
    try:
        tensors = _st_load(blob)
    except Exception as e:  # safetensors raises its own error types
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {TENSORS_FILE} cannot be parsed ({e}); {_FIX_CORRUPT}"
        ) from e
    check_finite_tensors(path, tensors, user_meta)
    if str(device) != "cpu":
        tensors = {k: v.to(device) for k, v in tensors.items()}
    return tensors, user_meta


def check_finite_tensors(path: Path, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Refuse a checkpoint holding NaN or infinite values (weights or optimizer state): one line
    naming the file, the layer and the first such tensor. Training never commits one, so it comes
    from a diverged run of another tool, an older hdppo, or an edit."""
    for key, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise CheckpointError(
                f"checkpoint {path / TENSORS_FILE} of layer {meta.get('layer', '?')!r} holds non-finite "
                f"values (NaN or infinite) in {key} ({bad} of {t.numel()}): the training that wrote it "
                "diverged; load an earlier checkpoint (RUN/commits/NNNNNN/LAYER) or retrain with a lower lr"
            )


def check_compatible(meta: dict, expected: dict, what: str) -> None:
    """Raise CheckpointError naming every key of ``expected`` whose value differs in ``meta``.

    Values are compared after a JSON round trip, so tuples equal lists. ``what`` names the
    checkpoint in the message, e.g. ``"checkpoint runs/x/low/latest"``.
    """

    def norm(v: Any) -> Any:
        try:
            return json.loads(json.dumps(v, sort_keys=True))
        except (TypeError, ValueError):
            return v

    problems = []
    for key, want in expected.items():
        if key not in meta:
            problems.append(f"{key}: missing in checkpoint, expected {want!r}")
        elif norm(meta[key]) != norm(want):
            problems.append(f"{key}: checkpoint has {meta[key]!r}, expected {want!r}")
    if problems:
        raise CheckpointError(
            f"{what} is incompatible: "
            + "; ".join(problems)
            + "; load a checkpoint trained for this scenario and layer, or retrain"
        )


# ---------------------------------------------------------------------------------------------
# modules and optimizers as flat tensor dicts


def module_state(module: torch.nn.Module, prefix: str = MODEL_PREFIX) -> dict[str, torch.Tensor]:
    """The module's state_dict (parameters and buffers) as a flat dict with keys ``prefix + name``."""
    return {prefix + k: v.detach() for k, v in module.state_dict().items()}


def load_module_state(
    module: torch.nn.Module, tensors: dict[str, torch.Tensor], prefix: str = MODEL_PREFIX
) -> None:
    """Load the ``prefix``-keyed tensors into ``module``; CheckpointError on any mismatch."""
    state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [
        f"{k}: checkpoint {tuple(state[k].shape)}, model {tuple(own[k].shape)}"
        for k in sorted(set(own) & set(state))
        if state[k].shape != own[k].shape
    ]
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if unexpected:
        problems.append(f"unexpected {unexpected}")
    if shapes:
        problems.append("shape mismatch " + ", ".join(shapes))
    if problems:
        raise CheckpointError(
            "checkpoint does not match the policy network: "
            + "; ".join(problems)
            + "; load a checkpoint of the same layer, scenario and network size"
        )
    module.load_state_dict(state)


def optimizer_state(
    opt: torch.optim.Optimizer, prefix: str = OPTIM_PREFIX
) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer (e.g. Adam) state into flat tensors and JSON metadata.

    Tensors are keyed ``{prefix}state.{param_index}.{name}`` (exp_avg, exp_avg_sq, step, ...);
    the JSON part holds the param_groups hyperparameters and any non-tensor state values.
    Store the JSON part in the checkpoint meta and pass both back to load_optimizer_state.
    """
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entries in sd["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}state.{idx}.{name}"] = value.detach()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    groups = []
    for g, group in enumerate(sd["param_groups"]):
        out: dict[str, Any] = {}
        for key, value in group.items():
            if isinstance(value, torch.Tensor):  # e.g. a tensor learning rate
                tensors[f"{prefix}group.{g}.{key}"] = value.detach()
                out[key] = {"__tensor__": f"{prefix}group.{g}.{key}"}
            else:
                out[key] = list(value) if isinstance(value, tuple) else value
        groups.append(out)
    meta = {"type": type(opt).__name__, "param_groups": groups, "scalars": scalars}
    return tensors, meta


def load_optimizer_state(
    opt: torch.optim.Optimizer,
    tensors: dict[str, torch.Tensor],
    meta: dict,
    prefix: str = OPTIM_PREFIX,
) -> None:
    """Restore an optimizer from optimizer_state's output; CheckpointError on mismatch."""
    fix = "load a checkpoint of the same layer and network, or retrain"
    if meta.get("type") != type(opt).__name__:
        raise CheckpointError(
            f"checkpoint optimizer is {meta.get('type')!r}, this run uses "
            f"{type(opt).__name__!r}; {fix}"
        )
    current = opt.state_dict()["param_groups"]
    saved = meta.get("param_groups", [])
    if [len(g["params"]) for g in saved] != [len(g["params"]) for g in current]:
        raise CheckpointError(
            "checkpoint optimizer has param groups of sizes "
            f"{[len(g['params']) for g in saved]}, this run has "
            f"{[len(g['params']) for g in current]}; {fix}"
        )
    groups = []
    for s, c in zip(saved, current):
        group = {}
        for key, value in s.items():
            if isinstance(value, dict) and "__tensor__" in value:
                value = tensors[value["__tensor__"]].clone()
            elif isinstance(value, list) and isinstance(c.get(key), tuple):
                value = tuple(value)
            group[key] = value
        group["params"] = list(c["params"])  # ids of this run's parameters, in saved order
        groups.append(group)

    state: dict[int, dict[str, Any]] = {}
    head = f"{prefix}state."
    for key, value in tensors.items():
        if key.startswith(head):
            number, name = key[len(head):].split(".", 1)
            state.setdefault(int(number), {})[name] = value.clone()
    for idx, entries in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(entries)
    params = [p for group in opt.param_groups for p in group["params"]]
    for idx, entries in state.items():
        if not 0 <= idx < len(params):
            raise CheckpointError(
                f"checkpoint optimizer has state for parameter {idx}, this run has "
                f"{len(params)} parameters; {fix}"
            )
        for name in _PARAM_SHAPED & entries.keys():
            if tuple(entries[name].shape) != tuple(params[idx].shape):
                raise CheckpointError(
                    f"checkpoint optimizer state {name} of parameter {idx} has shape "
                    f"{tuple(entries[name].shape)}, the parameter has {tuple(params[idx].shape)}; "
                    f"{fix}"
                )
    try:
        opt.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, KeyError, RuntimeError) as e:
        raise CheckpointError(f"checkpoint optimizer state cannot be loaded ({e}); {fix}") from e
