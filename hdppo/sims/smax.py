"""SMAX (JaxMARL's StarCraft micro in JAX) against its heuristic enemy, as hdppo batches and scenarios.

`SmaxBatch` is a `JaxmarlBatch` over `HeuristicEnemySMAX` that knows SMAX's state: a unit whose
health reaches 0 is dead (it stays in the team, stopped, until the episode ends, and keeps the team
reward SMAX pays the dead; `dead_units=leave` takes it out: see `hdppo.sims.jaxmarl`); the episode
is decided (terminated) when one side has no living unit and truncated at `max_steps`;
`episode_info` reports `win` (every enemy dead, an ally alive), `allies_alive` and
`enemies_killed` (fractions); `positions()` and `scene(e)` read the units' places.

`smax_scenario(map_name, **defaults)` makes the scenario of a SMAX map (`3m`, `2s3z`, `5m_vs_6m`,
`3s5z`, ...: every map of `jaxmarl.environments.smax.map_name_to_scenario`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from hdppo.sims.base import EnvStep
from hdppo.sims.jaxmarl import JaxmarlBatch, jaxmarl_scenario
from hdppo.sims.scene import Scene
from hdppo.sims.smax_world import smax_env, smax_maps, world_units

__all__ = ["SMAX_DEFAULTS", "SmaxBatch", "smax_env", "smax_maps", "smax_scenario", "world_units"]

# SMAX's defaults as JaxMARL's published SMAX baselines set them (baselines/*/config/*smax*.yaml)
SMAX_DEFAULTS: dict[str, Any] = dict(max_steps=100, see_enemy_actions=True, walls_cause_death=True,
                                     attack_mode="closest", enemy_shoots=True, won_battle_bonus=1.0)


class SmaxBatch(JaxmarlBatch):
    """E copies of one HeuristicEnemySMAX map (see the module docstring). `state_before_step()` is
    the world state before the last step (the hierarchy's per-step goal hooks compare the two)."""

    _before: np.ndarray | None = None

    def reset(self, seed: int | None = None) -> None:
        self._before = None
        super().reset(seed)

    def step(self, actions: np.ndarray) -> EnvStep:
        self._before = self.state()
        return super().step(actions)

    def state_before_step(self) -> np.ndarray:
        """The world state [E, S] before the last step (the current one before any step)."""
        return self.state() if self._before is None else self._before

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


def smax_scenario(map_name: str, *, name: str | None = None, description: str = "", hier: bool = False,
                  **defaults: Any) -> Any:
    """The hdppo scenario of a SMAX map against the heuristic enemy: a flat team by default
    (`layers=3`: commander -> squads of `squad_size` -> units with learned goals; `hier=true`: the
    commander assigns each squad an enemy, squads each unit, see `hdppo.sims.smax_hier`). `defaults`
    are config defaults, SMAX parameters (`max_steps`, `attack_mode`, ...) included."""
    from hdppo.sims import smax_hier
    params = {**SMAX_DEFAULTS, **defaults}
    return jaxmarl_scenario(smax_env, name=name or f"smax_{map_name}", batch=SmaxBatch,
                            description=description or f"SMAX {map_name} vs JaxMARL's heuristic enemy",
                            make_layers=smax_hier.layers, make_graph=smax_hier.graph, goal_xy=smax_hier.goal_xy,
                            team_keys={"hier": hier, "hold": False, "goal_sampler": "uniform"},
                            map_name=map_name, **params)
