"""Run folders as the tools after training read them: config, scenario source, checkpoints per layer."""
from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from hdppo.errors import ConfigError

SCENARIO_COPY = "scenario.py"            # a path scenario's file, copied into the run folder
SCENARIO_SOURCE = "scenario_source.json"  # its absolute path and sha256 at train start


CONFIG = "config.json"
CONFIG_LIMIT = 16 << 20          # a config.json larger than this is not one hdppo wrote
# what every reader of a run needs from config.json, and its type
CONFIG_KEYS: dict[str, type] = {"scenario": str, "scenario_overrides": dict, "train": dict, "layers": list,
                                "layer_names": list, "frozen": dict}


def load_run_config(run: str | Path, need: tuple[str, ...] = tuple(CONFIG_KEYS)) -> dict[str, Any]:
    """The run's config.json, checked: valid JSON, an object, the keys in `need` of their types, layer
    names that stay inside the run folder. A ConfigError naming the file and the fix otherwise."""
    path = Path(run) / CONFIG
    if not path.is_file():
        raise ConfigError(f"{run} is not an hdppo run folder (no config.json)",
                          "pass the --out folder of a `hdppo train` run")
    fix = (f"restore {path} from a copy of the run (it holds the run's scenario and settings, which nothing "
           "else in the folder records)")
    try:
        if path.stat().st_size > CONFIG_LIMIT:
            raise ConfigError(f"{path} is over {CONFIG_LIMIT >> 20} MiB, not a config hdppo wrote", fix)
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not text (byte {exc.start}): it was damaged or replaced", fix) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): it "
                          "was cut short or edited", fix) from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror or exc})", fix) from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} holds a {type(config).__name__}, not an hdppo run config (an object)", fix)
    for key in need:
        want = CONFIG_KEYS.get(key, object)
        if key not in config:
            raise ConfigError(f"{path} has no {key!r}: it is not a whole hdppo run config", fix)
        if not isinstance(config[key], want):
            raise ConfigError(f"{path} has {key!r} = {config[key]!r}, not a {want.__name__}", fix)
    for key in ("layers", "layer_names"):
        for name in config.get(key, []) if isinstance(config.get(key), list) else []:
            if not _plain(name):
                raise ConfigError(f"{path} names layer {name!r} in {key!r}, which is not a plain folder name "
                                  "(it would lead outside the run folder)", fix)
    train = config.get("train")
    if isinstance(train, dict) and not (isinstance(train.get("layers", {}), dict)
                                        and all(isinstance(v, dict) for v in train.get("layers", {}).values())):
        raise ConfigError(f"{path} has a 'train' whose 'layers' is not an object of layer settings", fix)
    frozen = config.get("frozen", {})
    if not (isinstance(frozen, dict) and all(_plain(k) and isinstance(v, str) for k, v in frozen.items())):
        raise ConfigError(f"{path} has a 'frozen' that is not an object of layer -> checkpoint folder", fix)
    if "train" in need:
        from hdppo.engine.config import train_config_from_dict
        try:
            train_config_from_dict(config["train"])        # every value of the type its setting takes
        except ConfigError as exc:
            raise ConfigError(f"{path} has a training setting hdppo cannot use: {exc.problem}", fix) from None
    return config


def _plain(name: Any) -> bool:
    from hdppo.engine.commit import plain_name
    return plain_name(name)


# Which checkpoints of a run a reader plays (`hdppo eval --checkpoint`, `hdppo.load(checkpoint=...)`): the
# folder in the run each name means. latest: the newest commit; best: the best evaluation during training.
CHECKPOINTS = {"latest": "checkpoints", "best": "best"}


def checkpoint_folder(run: str | Path, checkpoint: str = "latest") -> Path:
    """RUN/checkpoints (latest) or RUN/best (best); a ConfigError for another name, or a best the run lacks."""
    if checkpoint not in CHECKPOINTS:
        raise ConfigError(f"checkpoint {checkpoint!r} is not one of {list(CHECKPOINTS)}",
                          "pass --checkpoint latest (the newest commit) or best (the best evaluation during training)")
    folder = Path(run) / CHECKPOINTS[checkpoint]
    if checkpoint == "best" and not folder.exists():
        raise ConfigError(f"run {run} has no best checkpoint ({folder} is missing): it is written by evaluations "
                          "during training", "train with eval_every=N (env steps), or pass --checkpoint latest")
    return folder


def team_checkpoints(run: str | Path, config: dict[str, Any], checkpoint: str = "latest") -> dict[str, str]:
    """Checkpoint folder per layer that acts from one: the run's own (its newest commit, or its best
    with checkpoint="best"), else the one it loaded frozen."""
    frozen = dict(config.get("frozen", {}))
    link = checkpoint_folder(run, checkpoint)
    if link.exists() and not inside(link, run):
        raise ConfigError(f"{link} leads outside the run folder (to {link.resolve()})",
                          f"point it at the newest commit: `hdppo train --resume {run}` does, or "
                          f"`ln -sfn commits/NNNNNN {link}`")
    for layer in config["layer_names"]:
        ckpt = link / layer
        if (ckpt / "meta.json").is_file():
            frozen[layer] = str(ckpt)
    return frozen


def check_team(run: str | Path, config: dict[str, Any], checkpoint: str = "latest") -> dict[str, str]:
    """team_checkpoints(run, config, checkpoint), each checked before anything reads its tensors: meta.json's
    format and policy, the tensors file's size (against meta.json, its header, and the commit's
    manifest) and the policy's sizes against the tensors. CheckpointError naming the file otherwise."""
    from hdppo.engine.checkpoint import CheckpointError, inspect_checkpoint
    team = team_checkpoints(run, config, checkpoint)
    folder = checkpoint_folder(run, checkpoint)
    manifest = _manifest_sizes(folder)
    for layer, path in team.items():
        name = "tensors.safetensors"
        want, file = manifest.get(f"{layer}/{name}"), Path(path) / name
        if want is not None and Path(path).parent == folder and file.is_file() \
                and file.stat().st_size != want:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} is {file.stat().st_size:,} bytes, "
                                  f"the commit's manifest.json records {want:,}; restore the run's newest "
                                  "commit or evaluate an older one")
        inspect_checkpoint(path)
    return team


def _manifest_sizes(commit: Path) -> dict[str, int]:
    try:
        sizes = json.loads((commit / "manifest.json").read_text()).get("sizes", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {k: v for k, v in sizes.items() if isinstance(v, int)} if isinstance(sizes, dict) else {}


def untrained_layers(run: str | Path, config: dict[str, Any], checkpoint: str = "latest") -> list[str]:
    """Layers the run trained that have no checkpoint yet (the run stopped before its first save)."""
    have = team_checkpoints(run, config, checkpoint)
    return [layer for layer in config.get("layers", []) if layer not in have]


def _is_path(scenario: str) -> bool:
    return scenario.endswith(".py") or "/" in scenario or "\\" in scenario


def _sha256(path: Path) -> str:
    from hdppo.engine.commit import sha256_file  # one chunked hash for commits and scenario records
    return sha256_file(path)


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether `path` (links followed) lies in `folder`."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def record_scenario(run: str | Path, scenario: str) -> None:
    """Keep a path scenario usable from anywhere: copy the file into the run folder and record its
    absolute path and sha256 (built-in names need nothing). Loading the run later uses the original
    while it is there with this content; the copy runs only with --trust-run (see resolve_scenario)."""
    if not _is_path(scenario):
        return
    src = Path(scenario).resolve()
    if not src.is_file():
        return
    run = Path(run)
    digest = _sha256(src)
    record = run / SCENARIO_SOURCE
    if (run / SCENARIO_COPY).is_file() and _read_record(run) == {"path": str(src), "sha256": digest}:
        return                                      # already recorded (the Trainer does it at the run's start)
    shutil.copyfile(src, run / SCENARIO_COPY)
    tmp = record.with_name(record.name + ".tmp")
    tmp.write_text(json.dumps({"path": str(src), "sha256": digest}, indent=2))
    tmp.replace(record)


def _read_record(run: Path) -> dict[str, str] | None:
    """scenario_source.json as {"path", "sha256"}, or None when absent or malformed."""
    try:
        if (run / SCENARIO_SOURCE).stat().st_size > 1 << 20:
            return None
        info = json.loads((run / SCENARIO_SOURCE).read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(info, dict) and isinstance(info.get("path"), str) and isinstance(info.get("sha256"), str)):
        return None
    return {"path": info["path"], "sha256": info["sha256"]}


# What the user said about the run folders a command reads: (resolved run folder, trust_run, scenario), newest last.
# hdppo.load, eval, export and render pass it to resolve_scenario directly; the CLI also sets it here
# around the code that resolves a run's scenario itself (--resume, diagnose).
_ACCESS: ContextVar[tuple[tuple[str, bool, str | None], ...]] = ContextVar("hdppo_run_access", default=())


@contextmanager
def run_access(run: str | Path, *, trust_run: bool = False, scenario: str | None = None) -> Iterator[None]:
    """Inside this block, resolve_scenario(run, ...) trusts the run's own scenario copy if `trust_run`,
    and loads `scenario` (a name or a path the user gave) instead of the recorded one if given."""
    token = _ACCESS.set((*_ACCESS.get(), (str(Path(run).resolve()), trust_run, scenario)))
    try:
        yield
    finally:
        _ACCESS.reset(token)


def resolve_scenario(run: str | Path, config: dict[str, Any], *, trust_run: bool | None = None,
                     scenario: str | None = None) -> str:
    """What load_scenario should load for this run. A run folder never runs code it carries unless
    the user says so:

    - `scenario` given (the user's own name or path): that;
    - a built-in name, or a name the project's ./scenarios has (not one inside the run folder);
    - a path scenario: the file the run was trained on, while it exists outside the run folder with
      the sha256 recorded at train time (a folder without that record: the absolute path as written);
    - only with `trust_run`: the run's own copy, RUN/scenario.py (or the path as written, from here).

    Otherwise a ConfigError naming the file and the fix (--trust-run, or --scenario PATH)."""
    run = Path(run)
    key = str(run.resolve())
    said_trust, said_scenario = next(((t, sc) for k, t, sc in reversed(_ACCESS.get()) if k == key), (False, None))
    trust_run = said_trust if trust_run is None else trust_run
    scenario = scenario if scenario is not None else said_scenario
    if scenario is not None:
        _warn_if_other(run, scenario)
        return scenario
    recorded = config["scenario"]
    if not _is_path(recorded):
        from hdppo.team.scenario import user_scenario
        local = user_scenario(recorded)
        if local is not None and inside(local, run) and not trust_run:
            raise _untrusted(run, local, f"scenario {recorded!r} is found as {local}, inside the run folder")
        return recorded
    record = _read_record(run)
    candidates = [Path(record["path"])] if record else []
    if Path(recorded).is_absolute() and Path(recorded) not in candidates:
        candidates.append(Path(recorded))
    for path in candidates:
        if not path.is_absolute() or not path.is_file() or inside(path, run):
            continue
        if record is None or _sha256(path) == record["sha256"]:
            return str(path)          # the original (it may import files next to it)
    copy = run / SCENARIO_COPY
    if trust_run:
        if copy.is_file():
            return str(copy)
        if Path(recorded).is_file():
            return recorded
    original = Path(record["path"]) if record else Path(recorded)
    if record is None and not original.is_absolute():
        what = f"the scenario file {recorded} (a path relative to where it was trained, with no sha256 recorded)"
    elif inside(original, run):
        what = f"the scenario file {original}, inside the run folder"
    elif not original.is_file():
        what = f"the scenario file {original}, which is gone"
    else:
        what = f"the scenario file {original}, which has changed since the run was trained (its sha256 differs)"
    if copy.is_file() or inside(original, run):
        file = copy if copy.is_file() else original
        raise _untrusted(run, file, f"run {run} was trained on {what}")
    raise ConfigError(f"run {run} was trained on {what}, and the run folder holds no copy of it",
                      "pass --scenario PATH (scenario=PATH in Python) naming the scenario file to load it with")


def _untrusted(run: Path, file: Path, why: str) -> ConfigError:
    return ConfigError(f"{why}; what is left is the Python the run folder carries, {file}, which runs only "
                       "when you say so", f"pass --trust-run (trust_run=True in hdppo.load) if you trust {file}, "
                       "or --scenario PATH (scenario=PATH) naming a scenario file you trust")


_WARNED: set[tuple[str, str]] = set()


def _warn_if_other(run: Path, scenario: str) -> None:
    record = _read_record(run)
    key = (str(run.resolve()), str(Path(scenario).resolve()))
    if record is None or not _is_path(scenario) or not Path(scenario).is_file() or key in _WARNED:
        return
    if _sha256(Path(scenario)) != record["sha256"]:
        _WARNED.add(key)
        warnings.warn(f"scenario file {scenario} is not the one run {run} was trained on (its sha256 differs "
                      f"from {SCENARIO_SOURCE}'s); the checkpoints are refused if its spaces differ", stacklevel=3)


def record_resolved(run: str | Path, **values: Any) -> None:
    """Add what the trainer resolved at start (e.g. workers=0 -> the real count) to config.json's "resolved"."""
    path = Path(run) / "config.json"
    config = json.loads(path.read_text())
    config.setdefault("resolved", {}).update(values)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(config, indent=2, default=str))
    tmp.replace(path)


def checkpoint_arg(path: str | Path, layer: str) -> str:
    """A --load value as a checkpoint folder: a run folder becomes RUN/checkpoints/LAYER."""
    p = Path(path)
    if (p / "meta.json").is_file() or not (p / "config.json").is_file():
        return str(p)
    ckpt = p / "checkpoints" / layer
    if not (ckpt / "meta.json").is_file():
        raise ConfigError(f"run {p} has no checkpoint for layer {layer!r}",
                          f"train that layer in {p} first, or point --load {layer}= at a checkpoint folder")
    return str(ckpt)
