"""Attention: a layer's nodes observe only the parts of their own features that their goals keep.

A Layer with `attend(goals, ctx)` filters its nodes' own features where they enter the nodes'
observations (HierarchyEnv.node_obs, so training and a deployed team alike), recomputed every step
from the goals the nodes hold: a dropped feature reads 0. Hooks, the parent's grounding and the
layers above still read the whole features, and the observation keeps its width (its bounds are
widened to include 0, see layer_info).
"""
from __future__ import annotations

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.team.scenario import Layer, LayerContext


def check_layout(spec: Layer, width: int, scenario: str) -> None:
    """Refuse an entities block that does not fit inside the layer's own features (width D)."""
    ent = spec.entities
    if ent is not None and ent.end > width:
        raise ScenarioError(f"layer {spec.name!r} declares {ent}, which ends at feature {ent.end}, but its own "
                            f"features have {width}", "fix offset, size or count to lie inside the features",
                            where=f"scenario {scenario!r}")


def keep_mask(spec: Layer, ctx: LayerContext, width: int, scenario: str) -> np.ndarray:
    """Which of the nodes' own features their observations keep, bool [E, N, D], from spec.attend."""
    assert spec.attend is not None
    E, N = ctx.alive.shape
    ent = spec.entities
    want = (E, N, width if ent is None else ent.count)
    keep = np.asarray(spec.attend(ctx.goals, ctx))
    if keep.shape != want or keep.dtype != bool:
        what = "[E, N, entities.count], one flag per entity" if ent is not None else "[E, N, D], one flag per feature"
        raise ScenarioError(f"attend of layer {spec.name!r} returned {keep.dtype} {keep.shape}, expected bool {want}",
                            f"return a bool array {what} (e.g. np.arange(n) == goals[..., None])",
                            where=f"scenario {scenario!r}")
    if ent is None:
        return keep
    full = np.ones((E, N, width), dtype=bool)
    full[..., ent.offset:ent.end] = np.repeat(keep, ent.size, axis=2)
    return full


def attended(spec: Layer, features: np.ndarray, ctx: LayerContext, scenario: str) -> np.ndarray:
    """The nodes' own features [E, N, D] with what their goals do not keep set to 0."""
    return np.where(keep_mask(spec, ctx, features.shape[2], scenario), features, np.float32(0))
