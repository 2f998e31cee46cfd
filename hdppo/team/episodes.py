"""The statistics of a finished episode of one env copy."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import BatchedEnv
from hdppo.team.interfaces import LayerInfo
from hdppo.team.scenario import Layer

# what an episode record and the run row built from it hold already: a scenario metric may not reuse them
RESERVED = frozenset({"env", "length", "team_return", "node_returns", "unit_env_returns", "members",
                      "env_steps", "sps", "cpu_percent", "episodes"})
RESERVED_PREFIXES = ("return/", "goal_success/")


class Episodes(Protocol):
    """What episode statistics read of a HierarchyEnv (typed here so this module need not import it)."""

    t: np.ndarray
    unit_env_return: np.ndarray
    specs: list[Layer]
    layers: list[Any]
    detailed_stats: bool
    env: BatchedEnv
    info: list[LayerInfo]
    n_layers: int

    @property
    def idx(self) -> list[np.ndarray]: ...

    @property
    def struct(self) -> list[np.ndarray]: ...


def episode_stats(hier: Episodes, e: int) -> dict[str, Any]:
    """Length, team return (the units' env rewards), each layer's mean node return, the env's own
    episode info; with `detailed_stats` also per-node returns and membership (hdppo check)."""
    stats: dict[str, Any] = {"env": int(e), "length": int(hier.t[e] + 1),
                             "team_return": float(hier.unit_env_return[e].sum())}
    for i, spec in enumerate(hier.specs):
        stats[f"return/{spec.name}"] = float(hier.layers[i].ep_return[e].mean())
    if hier.detailed_stats:
        stats["node_returns"] = {spec.name: hier.layers[i].ep_return[e].copy() for i, spec in enumerate(hier.specs)}
        stats["unit_env_returns"] = hier.unit_env_return[e].copy()
        stats["members"] = {spec.name: members(hier, i, e) for i, spec in enumerate(hier.specs)}
    info = hier.env.episode_info(int(e))
    if info:
        clash = [k for k in info if k in stats or k in RESERVED or k.startswith(RESERVED_PREFIXES)]
        if clash:
            raise ScenarioError(f"the episode metric {clash[0]!r} has the name of a value hdppo records itself",
                                f"rename it in the scenario's episode_info (names hdppo keeps: "
                                f"{', '.join(sorted(RESERVED))}, return/LAYER, goal_success/LAYER)")
        stats.update(info)
    return stats


def members(hier: Episodes, i: int, e: int) -> list[list[int]]:
    """Unit indices under each node of layer i in copy e (this episode's grouping)."""
    groups = [[u] for u in range(len(hier.info[-1].nodes))]
    for j in reversed(range(i, hier.n_layers - 1)):
        idx, struct = hier.idx[j][e], hier.struct[j][e]
        groups = [[u for c in range(idx.shape[1]) if struct[n, c] for u in groups[idx[n, c]]]
                  for n in range(idx.shape[0])]
    return groups
