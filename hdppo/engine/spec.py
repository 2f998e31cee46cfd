"""RunSpec: one training run, resolved once.

`RunSpec.from_overrides(scenario, overrides, layers=..., out=...)` loads the scenario, builds its
config, learns the layer names from it and splits the overrides into the train config and the
scenario's overrides, in that order and only once. The CLI (`hdppo train`) and `hdppo.train(...)`
both go through it (`hdppo.train` is in engine/entry.py); the Trainer reuses what it resolved,
and workers rebuild from the recorded (scenario, scenario_overrides, train) triple.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hdppo.engine.config import TrainConfig, resolve_overrides
from hdppo.engine.messages import LayerInfo
from hdppo.engine.modes import check_modes
from hdppo.errors import ConfigError
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Scenario, load_scenario, resolve_scenario_name


@dataclass
class Resolved:
    """What resolving a RunSpec's scenario gave: the loaded scenario, its config, its layer names."""

    scenario: Scenario
    config: Any
    layer_names: list[str]


@dataclass
class RunSpec:
    """A run: the scenario (a built-in name or a file path), its overrides, the train config, the
    layers trained (the others act with `frozen` checkpoints or their fixed controllers), the run folder."""

    scenario: str
    scenario_overrides: dict[str, Any]
    train: TrainConfig
    layers: list[str]                         # layers trained (in the concurrent schedule)
    frozen: dict[str, str] = field(default_factory=dict)
    out: Path = Path("runs/run")
    resolved: Resolved | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_overrides(cls, scenario: str, overrides: dict[str, Any] | None = None, *,
                       layers: str | list[str] = "all", frozen: dict[str, str] | None = None,
                       out: str | Path | None = None) -> RunSpec:
        """Resolve a run from `key=value` overrides (strings from a CLI, or typed values from Python):
        scenario keys (or `scenario.KEY`), train keys, layer keys for all layers or `LAYER.key`.
        `layers` is "all", "low,mid" or a list; `out` defaults to runs/SCENARIO-TIMESTAMP."""
        loaded = load_scenario(scenario)
        overrides = dict(overrides or {})
        scenario_keys = {f.name for f in dataclasses.fields(loaded.config)}
        # the layer names depend on the scenario config: apply the scenario's keys first
        own = {k.removeprefix("scenario."): v for k, v in overrides.items()
               if k.split(".")[0] in scenario_keys or k.startswith("scenario.")}
        cfg = loaded.make_config(own)
        names = [layer.name for layer in loaded.build_layers(cfg)]
        tc, scenario_overrides = resolve_overrides(overrides, names, scenario_keys)
        check_modes(tc)
        trained = _layer_list(layers, names, loaded.name)
        folder = Path(out) if out is not None else Path("runs") / f"{loaded.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        return cls(resolve_scenario_name(scenario), scenario_overrides, tc, trained, dict(frozen or {}), folder,
                   Resolved(loaded, cfg, names))

    @classmethod
    def from_run(cls, run: str | Path, *, steps: Any = None, progress: str | None = None) -> RunSpec:
        """The run recorded in RUN/config.json, to resume: only the budget (`steps`, a number or its
        text) and the progress display may change."""
        from hdppo.engine.config import check_train_config, train_config_from_dict
        from hdppo.overrides import coerce
        from hdppo.runfolder import load_run_config, resolve_scenario
        config = load_run_config(run)
        tc = train_config_from_dict(config["train"])
        if steps is not None:
            tc.steps = coerce(steps, int, "steps")
        if progress is not None:
            tc.progress = progress
        check_train_config(tc)
        check_modes(tc)
        return cls(resolve_scenario(run, config), config["scenario_overrides"], tc, config["layers"],
                   config["frozen"], Path(run))

    def resolve(self) -> Resolved:
        """The loaded scenario and its config (loaded here once for a spec built field by field)."""
        if self.resolved is None:
            loaded = load_scenario(self.scenario)
            cfg = loaded.make_config(self.scenario_overrides)
            self.resolved = Resolved(loaded, cfg, [layer.name for layer in loaded.build_layers(cfg)])
        return self.resolved

    def layer_infos(self) -> list[LayerInfo]:
        """The layers' static descriptions (spaces, slots, schedule), from a one-copy probe."""
        r = self.resolve()
        return layer_infos(r.scenario, r.config, self.train.seed)


def layer_infos(scenario: Scenario, cfg: Any, seed: int) -> list[LayerInfo]:
    """The layers' static descriptions, from a one-copy probe of the hierarchy."""
    probe = HierarchyEnv(scenario, cfg, n_envs=1, seed=seed)
    try:
        return probe.info
    finally:
        probe.close()


def _layer_list(layers: str | list[str], names: list[str], scenario: str) -> list[str]:
    chosen = names if layers == "all" else ([n.strip() for n in layers.split(",")] if isinstance(layers, str)
                                             else list(layers))
    for layer in chosen:
        if layer not in names:
            raise ConfigError(f"scenario {scenario!r} has no layer {layer!r}", f"use --layer all or one of {names}")
    return chosen
