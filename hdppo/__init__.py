"""hdppo: hierarchical multi-agent teams trained with per-layer DPPO.

The public API, for scenario authors and for running training from Python:

- write a scenario: `Scenario`, `Layer`, `LayerContext`, `ScenarioConfig`, `Opponents`, `Entities`,
  `AgentGraph`, and for native simulators `BatchedEnv`, `EnvStep`, `NumpyBatch` (the rest of what a
  simulator needs is in `hdppo.sims`);
- step a team by hand: `HierarchyEnv`, `load_scenario`;
- train: `train(scenario, overrides, ...)` returns the run folder; `RunSpec` is the resolved run;
  `Callback` and `Event` are what `train(..., callbacks=[...])` calls and tells;
- use a trained team: `load(RUN)` returns a `Team` to act inside your own loop (docs/deploy.md).

Imports stay light: each name loads its module (and torch, where it needs it) on first use.
The package's plan (docs/architecture.md): `hdppo.sims` (simulators as batched envs), `hdppo.team`
(the hierarchy over them), `hdppo.engine` (DPPO), `hdppo.runtime` (a trained team without the
training machinery), `hdppo.integrations` (hdppo teams inside other libraries: RLlib),
`hdppo.analysis` (diagnose, ablate, bench, plot) and `hdppo.cli`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

_WHERE = {
    "Scenario": "hdppo.team.scenario", "Layer": "hdppo.team.scenario",
    "LayerContext": "hdppo.team.scenario", "ScenarioConfig": "hdppo.team.scenario",
    "Opponents": "hdppo.team.scenario", "load_scenario": "hdppo.team.scenario", "Entities": "hdppo.team.scenario",
    "AgentGraph": "hdppo.team.graph",
    "BatchedEnv": "hdppo.sims.base", "EnvStep": "hdppo.sims.base", "NumpyBatch": "hdppo.sims.base",
    "HierarchyEnv": "hdppo.team.hierarchy",
    "RunSpec": "hdppo.engine.spec", "train": "hdppo.engine.entry",
    "Callback": "hdppo.engine.callbacks", "Event": "hdppo.engine.callbacks",
    "Team": "hdppo.runtime", "load": "hdppo.runtime",
}
__all__ = ["AgentGraph", "BatchedEnv", "Callback", "Entities", "EnvStep", "Event", "HierarchyEnv", "Layer",
           "LayerContext", "NumpyBatch", "Opponents", "RunSpec", "Scenario", "ScenarioConfig", "Team", "load",
           "load_scenario", "train"]
assert sorted(__all__) == sorted(_WHERE)

if TYPE_CHECKING:
    from hdppo.engine.callbacks import Callback, Event
    from hdppo.engine.entry import train
    from hdppo.engine.spec import RunSpec
    from hdppo.runtime import Team, load
    from hdppo.sims.base import BatchedEnv, EnvStep, NumpyBatch
    from hdppo.team.graph import AgentGraph
    from hdppo.team.hierarchy import HierarchyEnv
    from hdppo.team.scenario import Entities, Layer, LayerContext, Opponents, Scenario, ScenarioConfig, load_scenario


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'hdppo' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (the submodules already imported show up as attributes as usual)."""
    return sorted(__all__)
