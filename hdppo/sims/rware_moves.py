"""rware's collision resolution over E warehouses: which robots' moves commit this step.

rware 2.0 draws every robot's move as an edge start cell -> target cell (a robot that stays, turns,
loads, faces the wall or was refused has a self-loop) and, per weakly connected component of that
graph, commits the robots on its cycle if it has one (none for a swap of two robots), else the
robots on its longest path; every other robot's forward becomes a no-op. A cell holds one robot,
so each robot has one edge out: a component is chains of robots running into one empty cell (its
root) or into one cycle, and `commit` finds both by following the chains as arrays over copies.

The longest path into a root is unique unless two chains into one cell are equally long; rware
then takes the robot networkx meets first, an order that follows networkx's internal sets. The
copies where such a tie decides are resolved by networkx itself, the way rware calls it (rare).
"""
from __future__ import annotations

import numpy as np


def commit(start: np.ndarray, target: np.ndarray, hit: np.ndarray, cell_xy: np.ndarray) -> np.ndarray:
    """Committed robots [E, U] bool. start, target [E, U]: cell indices of each robot's start and
    requested cell (equal for a robot that does not move); hit [E, U]: the robot in each moving
    robot's target cell, -1 if none; cell_xy [C, 2]: each cell index's (x, y), for networkx.
    Copies where no robot drives into another's cell or into a cell another drives into commit
    every robot; the others are resolved by `_chains`."""
    E, U = start.shape
    committed = np.ones((E, U), bool)
    moving = target != start
    both = moving[:, :, None] & moving[:, None, :] & (target[:, :, None] == target[:, None, :])
    busy = ((moving & (hit >= 0)).any(axis=1) | (both.sum(axis=(1, 2)) > moving.sum(axis=1))).nonzero()[0]
    if len(busy):
        committed[busy], tie = _chains(target[busy], hit[busy], moving[busy], len(cell_xy))
        for e in busy[tie]:
            committed[e] = networkx_commit(cell_xy[start[e]], cell_xy[target[e]])
    return committed


def _chains(target: np.ndarray, hit: np.ndarray, moving: np.ndarray, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """commit's general case over copies [E, U]: the committed robots, and the copies [E] where a tie
    makes networkx decide. Nodes, flat over copies: each copy's U robots, then its n_cells cells
    as the roots (an empty target cell); a robot points at the robot in its target cell, at that
    cell when empty, at itself when it stays; a root at itself."""
    E, U = target.shape
    N = U + n_cells
    base = (np.arange(E) * N)[:, None]
    me = base + np.arange(U)
    succ = np.arange(E * N)
    succ[me] = base + np.where(moving, np.where(hit >= 0, hit, U + target), np.arange(U))
    path = [me]
    cycle = np.zeros((E, U), np.int64)                 # the length of the robot's own cycle, 0 if none
    for k in range(1, U + 1):
        path.append(succ[path[-1]])
        cycle[(cycle == 0) & (path[-1] == me)] = k
    chain = np.stack(path)                             # [U + 1, E, U]: the node k steps down each robot
    rooted = chain[-1] - base >= U                     # the robot's chain ends in an empty cell
    # depth of a node: the longest chain of robots into it (robots of rooted chains only)
    fresh = rooted & (chain[1:] != chain[:-1])
    depth = np.zeros(E * N, np.int64)
    np.maximum.at(depth, chain[1:][fresh], np.broadcast_to(np.arange(1, U + 1)[:, None, None], fresh.shape)[fresh])
    down = chain[1]
    best = rooted & (depth[me] + 1 == depth[down])     # the robot is a longest chain into the node it drives to
    flag = np.ones(E * N, bool)
    flag[me] = best
    on_path = rooted & flag[chain].all(axis=0)         # best at every step down to the root
    tie = (on_path & (np.bincount(down[best], minlength=E * N)[down] > 1)).any(axis=1)
    return ((cycle > 0) & (cycle != 2)) | on_path, tie


def networkx_commit(start_xy: np.ndarray, target_xy: np.ndarray) -> np.ndarray:
    """One warehouse's committed robots [U] the way rware finds them: its graph of (x, y) cells built
    robot by robot, then per weakly connected component its cycle (unless a swap) or longest path."""
    import networkx as nx

    starts = [tuple(int(v) for v in c) for c in start_xy]
    graph = nx.DiGraph()
    for s, t in zip(starts, target_xy):
        graph.add_edge(s, tuple(int(v) for v in t))
    robot = {s: i for i, s in enumerate(starts)}
    out = np.zeros(len(starts), bool)
    for nodes in nx.weakly_connected_components(graph):
        part = graph.subgraph(nodes).copy()
        try:
            edges = nx.find_cycle(part)
        except nx.NetworkXNoCycle:
            cells = nx.dag_longest_path(part)
        else:
            if len(edges) == 2:
                continue
            cells = [u for u, _ in edges]
        for c in cells:
            if c in robot:
                out[robot[c]] = True
    return out
