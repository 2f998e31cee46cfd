"""Simulators as batched envs: the adapters hdppo steps a team in, and what a native simulator needs.

- `hdppo.sims.base`: the `BatchedEnv` interface (`EnvStep`), `NumpyBatch` for numpy simulators
  seeded per copy with `copy_rngs`;
- `hdppo.sims.pettingzoo`: `PettingZooBatch`, copies of any PettingZoo ParallelEnv;
- `hdppo.sims.gymnasium`: `GymnasiumMultiAgent`, a gymnasium multi-agent env (tuple spaces, one
  done: lbforaging, rware, ma-gym) as a PettingZoo ParallelEnv for a scenario's `env(cfg)`;
- `hdppo.sims.vmas`: `VmasBatch` and `vmas_scenario` (the `vmas` extra);
- `hdppo.sims.jaxmarl`: `JaxmarlBatch` and `jaxmarl_scenario`, any JaxMARL env jitted and vmapped;
  `hdppo.sims.smax`: `SmaxBatch` and `smax_scenario`, SMAX's StarCraft micro (the `smax` extra);
- `hdppo.sims.rware_batch`: `RwareBatch`, RWARE 2.0's warehouses natively in numpy (no rware import),
  stepping as rware itself for the same seeds and actions (`rware_layout`, `rware_moves`);
- `hdppo.sims.parallel_view`: `BatchParallelEnv`, one copy of a batch behind PettingZoo's API;
- `hdppo.sims.scene`: `Scene` (what a frame shows), `Overlay`, `render_frame`.

A new simulator adapter is a module here. The names below are the public ones a scenario author
imports (`from hdppo.sims import NumpyBatch, copy_rngs, BatchParallelEnv, Scene, GymnasiumMultiAgent`); each loads its
module on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

_WHERE = {
    "BatchedEnv": "hdppo.sims.base", "EnvStep": "hdppo.sims.base", "NumpyBatch": "hdppo.sims.base",
    "copy_rngs": "hdppo.sims.base", "flat_space": "hdppo.sims.base",
    "PettingZooBatch": "hdppo.sims.pettingzoo", "GymnasiumMultiAgent": "hdppo.sims.gymnasium",
    "BatchParallelEnv": "hdppo.sims.parallel_view",
    "Scene": "hdppo.sims.scene", "Overlay": "hdppo.sims.scene", "render_frame": "hdppo.sims.scene",
    "VmasBatch": "hdppo.sims.vmas", "vmas_scenario": "hdppo.sims.vmas",
    "JaxmarlBatch": "hdppo.sims.jaxmarl", "jaxmarl_scenario": "hdppo.sims.jaxmarl",
    "SmaxBatch": "hdppo.sims.smax", "smax_scenario": "hdppo.sims.smax",
}
__all__ = ["BatchedEnv", "EnvStep", "NumpyBatch", "copy_rngs", "flat_space", "PettingZooBatch", "GymnasiumMultiAgent",
           "BatchParallelEnv", "Scene", "Overlay", "render_frame", "VmasBatch", "vmas_scenario", "JaxmarlBatch",
           "jaxmarl_scenario", "SmaxBatch", "smax_scenario"]
assert sorted(__all__) == sorted(_WHERE)

if TYPE_CHECKING:
    from hdppo.sims.base import BatchedEnv, EnvStep, NumpyBatch, copy_rngs, flat_space
    from hdppo.sims.gymnasium import GymnasiumMultiAgent
    from hdppo.sims.jaxmarl import JaxmarlBatch, jaxmarl_scenario
    from hdppo.sims.parallel_view import BatchParallelEnv
    from hdppo.sims.pettingzoo import PettingZooBatch
    from hdppo.sims.scene import Overlay, Scene, render_frame
    from hdppo.sims.smax import SmaxBatch, smax_scenario
    from hdppo.sims.vmas import VmasBatch, vmas_scenario


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'hdppo.sims' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
