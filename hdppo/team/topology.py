"""Who is whose child, per env copy: each upper layer's child index and each node's parent.

Per copy because spatial grouping changes squad membership every episode. For layer i (not the
bottom) `idx` [E, N, C] holds the indices of each node's children in layer i+1 (C = the largest
family) and `struct` [E, N, C] which of them are real children; for layer i (not the top)
`parent` and `pos` [E, N] give each node's parent and its position in that parent's family.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdppo.team.graph import AgentGraph, spatial_groups


@dataclass
class LayerTopology:
    idx: np.ndarray | None = None        # [E, N, C] children's indices in the layer below (None at the bottom)
    struct: np.ndarray | None = None     # [E, N, C] bool: the entry is a real child
    parent: np.ndarray | None = None     # [E, N] parent's index in the layer above (None at the top)
    pos: np.ndarray | None = None        # [E, N] position in the parent's family


def build_topology(graph: AgentGraph, n_envs: int) -> list[LayerTopology]:
    """Every layer's topology from the graph, the same for every copy until a regroup."""
    names = graph.layers
    layers = [LayerTopology() for _ in names]
    for i, name in enumerate(names[:-1]):
        idx, mask = graph.child_index(name)
        layers[i].idx = np.repeat(idx[None], n_envs, axis=0)
        layers[i].struct = np.repeat(mask[None], n_envs, axis=0)
    for i in range(1, len(names)):
        layers[i].parent = np.zeros((n_envs, len(graph.nodes(names[i]))), dtype=np.int64)
        layers[i].pos = np.zeros_like(layers[i].parent)
        refresh_parents(layers, i, np.ones(n_envs, dtype=bool))
    return layers


def refresh_parents(layers: list[LayerTopology], i: int, envs: np.ndarray) -> None:
    """parent / position-in-parent of layer i's nodes from layer i-1's child index, in copies envs [E]."""
    above, here = layers[i - 1], layers[i]
    assert above.idx is not None and above.struct is not None and here.parent is not None and here.pos is not None
    for e in np.flatnonzero(envs):
        rows, cols = np.nonzero(above.struct[e])
        here.parent[e, above.idx[e, rows, cols]] = rows
        here.pos[e, above.idx[e, rows, cols]] = cols


def regroup(layers: list[LayerTopology], positions: np.ndarray, group_size: int, envs: np.ndarray) -> None:
    """Units into the lowest upper layer's groups by position [E, U, 2] in copies envs [E] (groups
    beyond the last are folded into it; a full group takes no more units)."""
    i = len(layers) - 2
    squads = layers[i]
    assert squads.idx is not None and squads.struct is not None
    n_groups, width = squads.idx.shape[1], squads.idx.shape[2]
    for e in np.flatnonzero(envs):
        group = np.minimum(spatial_groups(positions[e], group_size), n_groups - 1)
        squads.struct[e] = False
        fill = np.zeros(n_groups, dtype=np.int64)
        for u, g in enumerate(group):
            if fill[g] < width:
                squads.idx[e, g, fill[g]] = u
                squads.struct[e, g, fill[g]] = True
                fill[g] += 1
    refresh_parents(layers, i + 1, envs)
