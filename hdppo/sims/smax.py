"""SMAX (JaxMARL's StarCraft micro in JAX) against its heuristic enemy, as hdppo batches and scenarios.

`SmaxBatch` is a `JaxmarlBatch` over `HeuristicEnemySMAX` that knows SMAX's state: a unit whose
health reaches 0 is dead; the episode is decided (terminated) when one side has no living unit and
truncated at `max_steps`; `episode_info` reports `win` (every enemy dead, an ally alive),
`allies_alive` and `enemies_killed` (fractions); `positions()` and `scene(e)` read the units' places.

`smax_scenario(map_name, **defaults)` makes the scenario of a SMAX map (`3m`, `2s3z`, `5m_vs_6m`,
`3s5z`, ...: every map of `jaxmarl.environments.smax.map_name_to_scenario`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.jaxmarl import JaxmarlBatch, import_jaxmarl, jaxmarl_scenario
from hdppo.sims.scene import Scene

# SMAX's defaults as JaxMARL's published SMAX baselines set them (baselines/*/config/*smax*.yaml)
SMAX_DEFAULTS: dict[str, Any] = dict(max_steps=100, see_enemy_actions=True, walls_cause_death=True,
                                     attack_mode="closest", enemy_shoots=True, won_battle_bonus=1.0)


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


class SmaxBatch(JaxmarlBatch):
    """E copies of one HeuristicEnemySMAX map (see the module docstring)."""

    def _sides(self, state: Any) -> tuple[Any, Any]:
        alive = state.state.unit_alive
        n = self.env.num_allies
        return alive[:n], alive[n:]

    def ends(self, state: Any, unit_done: Any, done: Any) -> tuple[Any, Any]:
        allies, enemies = self._sides(state)
        return ~allies, ~allies.any() | ~enemies.any()

    def metrics(self, state: Any) -> dict[str, Any]:
        allies, enemies = self._sides(state)
        jnp = self.jax.numpy
        return {"win": (allies.any() & ~enemies.any()).astype(jnp.float32),
                "allies_alive": allies.mean(dtype=jnp.float32), "enemies_killed": (~enemies).mean(dtype=jnp.float32)}

    def _places(self) -> tuple[np.ndarray, np.ndarray]:
        if self._state is None:
            self.reset()
        inner = self._state.state
        return np.asarray(inner.unit_positions), np.asarray(inner.unit_alive)

    def positions(self) -> np.ndarray:
        """The allies' (x, y) [E, U, 2], for spatial grouping."""
        return self._places()[0][:, :len(self.units)].copy()

    def scene(self, e: int) -> Scene:
        """Copy e's allies and enemies on the map, dead ones crossed out."""
        pos, alive = self._places()
        U = len(self.units)
        w, h = float(self.env.map_width), float(self.env.map_height)
        return Scene((0.0, w, 0.0, h), pos[e, :U].copy(), alive[e, :U].copy(), pos[e, U:].copy(),
                     alive[e, U:].copy())


def smax_scenario(map_name: str, *, name: str | None = None, description: str = "", **defaults: Any) -> Any:
    """The hdppo scenario of a SMAX map against the heuristic enemy: a flat team by default
    (`layers=3`: commander -> squads of `squad_size` -> units with learned goals). `defaults` are
    config defaults, SMAX parameters (`max_steps`, `attack_mode`, ...) included."""
    params = {**SMAX_DEFAULTS, **defaults}
    return jaxmarl_scenario(smax_env, name=name or f"smax_{map_name}", batch=SmaxBatch,
                            description=description or f"SMAX {map_name} vs JaxMARL's heuristic enemy",
                            map_name=map_name, **params)
