"""A seed group: the folder `hdppo train ... --seeds 0-4` writes, one normal run folder per seed
(GROUP/seed_0, GROUP/seed_1, ...) and a manifest, GROUP/seeds.json, saying which seeds and which
command. `hdppo eval` and `hdppo plot` take the group folder for its runs."""
from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hdppo.errors import ConfigError

MANIFEST = "seeds.json"
KIND = "hdppo seed group"


def seed_folder(group: str | Path, seed: int) -> Path:
    return Path(group) / f"seed_{seed}"


def is_group(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def read_manifest(group: str | Path) -> dict[str, Any]:
    """GROUP/seeds.json, or one line saying why it is not a seed group's."""
    path = Path(group) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read as a seed group's manifest ({exc})",
                          "restore it, or pass the seeds' run folders (GROUP/seed_N) one by one") from None
    if not (isinstance(data, dict) and data.get("kind") == KIND and isinstance(data.get("seeds"), list)):
        raise ConfigError(f"{path} is not a seed group's manifest", "pass a folder written by `hdppo train --seeds`")
    return data


def write_manifest(group: str | Path, seeds: list[int], command: str, args: dict[str, Any]) -> Path:
    """Record the group's seeds, its command line and the parsed arguments that continue it."""
    path = Path(group) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{MANIFEST}.part")
    tmp.write_text(json.dumps({"kind": KIND, "seeds": seeds, "command": command, "args": args,
                               "written": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2, default=str))
    tmp.replace(path)
    return path


def members(group: str | Path) -> list[tuple[int, Path]]:
    """(seed, run folder) of the group's seeds whose run has started (holds a config.json)."""
    return [(int(s), seed_folder(group, s)) for s in read_manifest(group)["seeds"]
            if (seed_folder(group, s) / "config.json").is_file()]


def expand_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders, with each seed group replaced by its started runs, in seed order."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not is_group(p):
            out.append(p)
            continue
        runs = [run for _, run in members(p)]
        if not runs:
            raise ConfigError(f"seed group {p} holds no started run yet", f"train it: `hdppo train --resume {p}`")
        out.extend(runs)
    return out


def run_status(run: Path) -> str:
    """"new" (no run there yet), "finished" or "unfinished" (a run to resume)."""
    if not run.is_dir() or not any(run.iterdir()):
        return "new"
    try:
        finished = json.loads((run / "state.json").read_text()).get("finished") is True
    except (OSError, ValueError, AttributeError):
        finished = False
    return "finished" if finished else "unfinished"
