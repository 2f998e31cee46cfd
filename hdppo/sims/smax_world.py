"""SMAX's maps, its env on a named map and the layout of its world state: what both the SMAX batch
(`hdppo.sims.smax`) and its hierarchy (`hdppo.sims.smax_hier`) read, so neither imports the other's
module to get it."""
from __future__ import annotations

from typing import Any

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.jaxmarl import import_jaxmarl


def smax_maps() -> list[str]:
    """The SMAX maps JaxMARL ships."""
    import_jaxmarl()
    from jaxmarl.environments.smax import smax_env
    return sorted(smax_env.MAP_NAME_TO_SCENARIO)


def smax_env(map_name: str = "3m", **params: Any) -> Any:
    """JaxMARL's HeuristicEnemySMAX on a named map; `params` go to it (and SMAX) as they are."""
    import_jaxmarl()
    from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario
    if map_name not in smax_maps():
        raise ScenarioError(f"SMAX has no map {map_name!r}", f"use map_name= one of: {', '.join(smax_maps())}")
    return HeuristicEnemySMAX(scenario=map_name_to_scenario(map_name), **params)


def world_units(world: np.ndarray, n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unit's (x, y) in map units [E, K, 2] and health fraction [E, K] (0: dead), allies
    first, read from SMAX world states [E, S] (`state()`; both are 0 for a dead unit)."""
    E, S = world.shape
    per = world[:, :S - 2 * n_units].reshape(E, n_units, -1)
    return per[..., 1:3], per[..., 0]
