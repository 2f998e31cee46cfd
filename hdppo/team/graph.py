"""AgentGraph: the layered team over a networkx DiGraph (edges parent -> child)."""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import networkx as nx
import numpy as np

from hdppo.errors import GraphError

Node = Hashable
N = TypeVar("N", bound=Hashable)   # a unit's name, as the caller gives it (a str for PettingZoo agents)

DEFAULT_LAYER_NAMES = {1: ("low",), 2: ("high", "low"), 3: ("high", "mid", "low")}


@dataclass(frozen=True)
class SpatialGrouping:
    """Regroup units under the parents of `layer` by position at every reset (squads of `group_size`)."""

    group_size: int


class AgentGraph:
    """A validated layered tree of nodes; leaves are env agents (units).

    `layers` lists layer names top to bottom. Node order inside a layer is fixed (sorted as given)
    and is the index every array in hdppo uses.
    """

    def __init__(self, graph: nx.DiGraph, layers: Sequence[str] | None = None,
                 spatial: SpatialGrouping | None = None) -> None:
        self.graph = graph
        self.spatial = spatial
        self.layers: list[str] = list(layers) if layers is not None else _infer_layers(graph)
        self._nodes: dict[str, list[Node]] = {name: [] for name in self.layers}
        for node, data in graph.nodes(data=True):
            layer = data.get("layer")
            if layer in self._nodes:
                self._nodes[layer].append(node)
        self._order = {name: i for i, name in enumerate(self.layers)}

    # ---- construction helpers -------------------------------------------------------------
    @classmethod
    def from_edges(cls, edges: Iterable[tuple[Node, Node]], layer_of: Mapping[Node, str],
                   layers: Sequence[str] | None = None) -> AgentGraph:
        """Build from explicit (parent, child) edges and a node -> layer-name mapping."""
        g = nx.DiGraph()
        for node, layer in layer_of.items():
            g.add_node(node, layer=layer)
        for parent, child in edges:
            for n in (parent, child):
                if n not in g:
                    raise GraphError(f"edge ({parent!r}, {child!r}) names node {n!r} that has no layer",
                                     f"add {n!r} to layer_of")
            g.add_edge(parent, child)
        return cls(g, layers)

    @classmethod
    def team(cls, units: Sequence[Node], depth: int, group_size: int, spatial: bool = False) -> AgentGraph:
        """The usual team of `depth` layers: 1 flat units; 2 a commander (high) over the units; 3 a
        commander over groups of `group_size` (mid) over the units, regrouped by position at each reset
        when `spatial`."""
        if depth == 1:
            return cls.groups(units)
        if depth == 2:
            return cls.groups(units, layers=("high", "low"))
        if depth == 3:
            return cls.groups(units, [group_size], spatial=spatial)
        raise GraphError(f"a team of depth {depth} is not built by AgentGraph.team",
                         "use depth 1, 2 or 3, or AgentGraph.groups with explicit sizes")

    @classmethod
    def groups(cls, units: Sequence[Node], sizes: Sequence[int] = (), layers: Sequence[str] | None = None,
               spatial: bool = False) -> AgentGraph:
        """Fixed-size groups: units -> groups of sizes[0] -> groups of sizes[1] ... -> one top node.

        `groups(units, [3])` makes squads of 3 under one commander (3 layers); `groups(units)` is flat
        (1 layer). With `spatial=True` units are regrouped by position at each reset.
        """
        depth = len(sizes) + 2 if sizes or (layers and len(layers) > 1) else 1
        names = tuple(layers) if layers else DEFAULT_LAYER_NAMES.get(depth) or tuple(
            ["high"] + [f"mid{i}" for i in range(depth - 2)] + ["low"])
        if len(names) != depth:
            raise GraphError(f"{len(sizes)} group sizes make {depth} layers but {len(names)} names were given",
                             "give one layer name per level, top to bottom")
        g = nx.DiGraph()
        for u in units:
            g.add_node(u, layer=names[-1])
        level = list(units)
        for i, size in enumerate(sizes):
            layer = names[-2 - i]
            if size < 1:
                raise GraphError(f"group size {size} is not positive", "use sizes >= 1")
            parents: list[Node] = []
            for j in range(0, len(level), size):
                p = f"{layer}_{j // size}"
                g.add_node(p, layer=layer)
                for c in level[j:j + size]:
                    g.add_edge(p, c)
                parents.append(p)
            level = parents
        if depth > 1:
            top = f"{names[0]}_0"
            g.add_node(top, layer=names[0])
            for c in level:
                g.add_edge(top, c)
        spatial_spec = SpatialGrouping(sizes[0]) if spatial and sizes else None
        return cls(g, names, spatial_spec)

    @classmethod
    def by_attribute(cls, units: Sequence[N], key: Callable[[N], Hashable] | Mapping[N, Hashable],
                     layers: Sequence[str] = ("high", "mid", "low")) -> AgentGraph:
        """Group units by an attribute (team, type, ...): one mid node per value under one top node."""
        if len(layers) != 3:
            raise GraphError(f"by_attribute builds 3 layers but got layer names {tuple(layers)}",
                             "pass three names, top to bottom, e.g. ('high', 'mid', 'low')")
        get = key.__getitem__ if isinstance(key, Mapping) else key
        g = nx.DiGraph()
        top = f"{layers[0]}_0"
        g.add_node(top, layer=layers[0])
        for u in units:
            g.add_node(u, layer=layers[-1])
            p = f"{layers[1]}_{get(u)}"
            if p not in g:
                g.add_node(p, layer=layers[1])
                g.add_edge(top, p)
            g.add_edge(p, u)
        return cls(g, layers)

    # ---- queries ---------------------------------------------------------------------------
    @property
    def units(self) -> list[Node]:
        """The leaves (bottom layer), in index order."""
        return self._nodes[self.layers[-1]]

    def nodes(self, layer: str) -> list[Node]:
        """Nodes of `layer` in index order."""
        return self._nodes[layer]

    def layer_of(self, node: Node) -> str:
        return self.graph.nodes[node]["layer"]

    def parent(self, node: Node) -> Node | None:
        preds = list(self.graph.predecessors(node))
        return preds[0] if preds else None

    def children(self, node: Node) -> list[Node]:
        layer = self.layers[self._order[self.layer_of(node)] + 1] if self.layer_of(node) != self.layers[-1] else None
        if layer is None:
            return []
        order = {n: i for i, n in enumerate(self._nodes[layer])}
        return sorted(self.graph.successors(node), key=order.__getitem__)

    def descendant_units(self, node: Node) -> list[Node]:
        if self.layer_of(node) == self.layers[-1]:
            return [node]
        leaves = set(nx.descendants(self.graph, node)) & set(self.units)
        return [u for u in self.units if u in leaves]

    def living_descendants(self, node: Node, alive: Iterable[Node]) -> list[Node]:
        """Units under `node` that are in `alive`."""
        living = set(alive)
        return [u for u in self.descendant_units(node) if u in living]

    def max_children(self, layer: str) -> int:
        return max((len(self.children(n)) for n in self._nodes[layer]), default=0)

    def child_index(self, layer: str) -> tuple[np.ndarray, np.ndarray]:
        """For `layer` (not the bottom): int array [N, C] of child indices and bool mask [N, C]."""
        nodes = self._nodes[layer]
        c = max(self.max_children(layer), 1)
        idx = np.zeros((len(nodes), c), dtype=np.int64)
        mask = np.zeros((len(nodes), c), dtype=bool)
        below = self.layers[self._order[layer] + 1]
        order = {n: i for i, n in enumerate(self._nodes[below])}
        for i, n in enumerate(nodes):
            for j, ch in enumerate(self.children(n)):
                idx[i, j] = order[ch]
                mask[i, j] = True
        return idx, mask

    # ---- validation ------------------------------------------------------------------------
    def validate(self, env_agents: Sequence[Node] | None = None, opponents: Iterable[Node] = (),
                 layer_names: Sequence[str] | None = None) -> None:
        """Raise GraphError naming the offending node and the fix; see docs/architecture.md."""
        g = self.graph
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = " -> ".join(str(e[0]) for e in cycle) + f" -> {cycle[0][0]}"
            raise GraphError(f"the agent graph has a cycle: {path}",
                             "edges go parent -> child only; remove the edge that points back up")
        for node, data in g.nodes(data=True):
            if "layer" not in data:
                raise GraphError(f"node {node!r} has no 'layer' attribute",
                                 f"add it with graph.add_node({node!r}, layer=NAME)")
            if data["layer"] not in self._order:
                raise GraphError(f"node {node!r} is in layer {data['layer']!r}, which is not one of {self.layers}",
                                 "name one of the scenario's layers")
        if layer_names is not None and list(layer_names) != self.layers:
            raise GraphError(f"the graph's layers {self.layers} (top to bottom) differ from the scenario's "
                             f"layers {list(layer_names)}", "make the graph's layer attributes match the Layer specs")
        for name in self.layers:
            if not self._nodes[name]:
                raise GraphError(f"layer {name!r} has no nodes", f"add nodes with layer={name!r} or drop the layer")
        for parent, child in g.edges:
            lp, lc = self._order[self.layer_of(parent)], self._order[self.layer_of(child)]
            if lc != lp + 1:
                raise GraphError(
                    f"node {child!r} (layer {self.layer_of(child)!r}) is a child of {parent!r} "
                    f"(layer {self.layer_of(parent)!r}) but a child must be exactly one layer below its parent",
                    "attach it to a node of the layer just above, or move it to the right layer")
        for node in g.nodes:
            depth = self._order[self.layer_of(node)]
            n_par = g.in_degree(node)
            if depth > 0 and n_par != 1:
                raise GraphError(f"node {node!r} has {n_par} parents; every node below the top has exactly one",
                                 f"give {node!r} one parent in layer {self.layers[depth - 1]!r}")
            if depth < len(self.layers) - 1 and g.out_degree(node) == 0:
                raise GraphError(f"node {node!r} (layer {self.layer_of(node)!r}) has no children, so it is a leaf "
                                 "above the bottom layer", "give it children or remove it")
        if env_agents is not None:
            agents = set(env_agents)
            for u in self.units:
                if u not in agents:
                    raise GraphError(f"leaf {u!r} is not an agent of the env "
                                     f"(agents: {sorted(map(str, agents))[:8]}...)",
                                     "leaves must be the env's possible_agents; rename the node")
            covered = set(self.units) | set(opponents)
            for a in env_agents:
                if a not in covered:
                    raise GraphError(f"env agent {a!r} is neither in the graph nor driven by the opponent controller",
                                     "add it as a leaf of the graph, or list it in the scenario's opponents")
            both = set(self.units) & set(opponents)
            if both:
                raise GraphError(f"agent {sorted(map(str, both))[0]!r} is both a unit of the graph and an opponent",
                                 "keep each env agent on one side")


def _infer_layers(graph: nx.DiGraph) -> list[str]:
    """Layer names top to bottom from the edges: a parent's layer is above its child's."""
    names: dict[str, int] = {}
    for _, data in graph.nodes(data=True):
        if "layer" in data:
            names.setdefault(data["layer"], 0)
    h = nx.DiGraph()
    h.add_nodes_from(names)
    for p, c in graph.edges:
        lp, lc = graph.nodes[p].get("layer"), graph.nodes[c].get("layer")
        if lp is not None and lc is not None and lp != lc:
            h.add_edge(lp, lc)
    try:
        return list(nx.topological_sort(h))
    except nx.NetworkXUnfeasible:
        return sorted(names)  # a cycle between layers: validate() names it


def spatial_groups(positions: np.ndarray, group_size: int) -> np.ndarray:
    """Group units by position: returns the group index [U] of each unit (groups of `group_size`).

    Greedy and deterministic: the unassigned unit with the smallest (x, y) seeds a group and takes
    its nearest unassigned neighbours. `positions` is [U, 2]; units with NaN positions go last.
    """
    u = positions.shape[0]
    pos = np.nan_to_num(positions.astype(np.float64), nan=1e9)
    free = np.ones(u, dtype=bool)
    group = np.zeros(u, dtype=np.int64)
    g = 0
    while free.any():
        cand = np.flatnonzero(free)
        seed = cand[np.lexsort((pos[cand, 1], pos[cand, 0]))[0]]
        d = np.linalg.norm(pos[cand] - pos[seed], axis=1)
        take = cand[np.argsort(d, kind="stable")[:group_size]]
        group[take] = g
        free[take] = False
        g += 1
    return group
