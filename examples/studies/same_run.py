"""Is a finished run still what its command makes? Reports reuse finished runs, so they must know.

`changed_settings(run, argv)` resolves `hdppo train ARGV` with the code installed now (defaults
included, nothing trained) and lists every setting where RUN/config.json differs: a default that
changed since the run (`low.epochs: 4 in the run, 16 now`), a scenario parameter, the layers
trained. Settings that do not change what training does (the budget, progress, checkpoint and
logging intervals, timeouts, the Ray address) are not compared, nor is a setting added since the
run was made that the command leaves at its default (a new option's default keeps the old
behaviour). A scenario key whose default changed what runs do when it arrived says what runs
made before it did, as its field's metadata `{"before": VALUE}` (hdppo.team.scenario.BEFORE):
a run without the key is then compared as if it had recorded VALUE.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hdppo.engine.config import NOT_TRAINING as NOT_COMPARED


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists and scalars are leaves."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def resolved_config(argv: list[str]) -> dict[str, Any]:
    """What `hdppo train ARGV` (arguments after `train`) would record in config.json, without training."""
    return _resolved(argv)[0]


def _resolved(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """resolved_config, and the flattened keys whose field says what runs made before it did (BEFORE)."""
    import dataclasses

    from hdppo.cli import parse
    from hdppo.cli.train import train_spec
    from hdppo.engine.config import train_config_to_dict
    from hdppo.team.scenario import BEFORE
    args = parse(["train", *argv])
    spec = train_spec(args)
    cfg = spec.resolve().config
    config = {"train": train_config_to_dict(spec.train), "scenario_config": dataclasses.asdict(cfg),
              "layers": spec.layers}
    before = {f"scenario_config.{f.name}": f.metadata[BEFORE] for f in dataclasses.fields(cfg) if BEFORE in f.metadata}
    return json.loads(json.dumps(config, default=str)), before     # as config.json holds it (tuples as lists)


def compared(key: str) -> bool:
    """Whether a flattened config key is part of what training does (`train.steps` is not)."""
    head, _, rest = key.partition(".")
    return head != "train" or rest.split(".")[0] not in NOT_COMPARED


def changed_settings(run: str | Path, argv: list[str]) -> list[str]:
    """'KEY: X in the run, Y now' for each setting where RUN/config.json differs from `hdppo train ARGV`
    resolved by this code; empty when ARGV would make the same run."""
    from hdppo.runfolder import load_run_config
    return changed_from(load_run_config(run), argv)


def changed_from(recorded: dict[str, Any], argv: list[str]) -> list[str]:
    """changed_settings for a run's recorded config (config.json's train, scenario_config and layers),
    e.g. one kept in a report's data file after the run folder is gone."""
    config, before = _resolved(argv)
    now = {k: v for k, v in flatten(config).items() if compared(k)}
    then = {k: v for k, v in flatten({k: recorded.get(k) for k in ("train", "scenario_config", "layers")}).items()
            if compared(k)}
    missing = "(not recorded)"
    was = {k: before[k] for k in set(now) - set(then) if k in before}    # newer than the run, its old value known
    added = {k for k in set(now) - set(then) - set(was) if not _named(k, argv)}     # newer, the default kept
    then.update(was)

    def shown(key: str) -> Any:
        return f"(not recorded: runs before it behaved as {was[key]})" if key in was else then.get(key, missing)
    return [f"{key}: {shown(key)} in the run, {now.get(key, missing)} now"
            for key in sorted((set(now) | set(then)) - added) if then.get(key, missing) != now.get(key, missing)]


def _named(key: str, argv: list[str]) -> bool:
    """Whether ARGV sets the setting KEY (`compass=true`, `low.epochs=4` for `...epochs`)."""
    leaf = key.rsplit(".", 1)[-1]
    keys = [tok.partition("=")[0] for tok in argv if "=" in tok and not tok.startswith("-")]
    return any(k.rsplit(".", 1)[-1] == leaf for k in keys)
