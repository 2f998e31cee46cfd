"""The warehouses rware 2.0 registers (`rware-{size}-{N}ag[-hard]-v2`), as arrays: grid size, highways,
delivery cells, shelf cells, robots and request-queue length. No rware import: the numbers are rware's.

A layout is `shelf_rows` x `shelf_columns` blocks of shelves, each block 2 wide and 8 high, between
highways; the grid is height (8 + 1) * rows + 2 by width 3 * columns + 1. Highways: every third
column, every ninth row, the bottom (delivery) row and the two middle columns of the bottom block
(the queue to the delivery cells). Every other cell starts with a shelf; the shelves are numbered
row by row (y, then x), as rware numbers them (its ids minus one). The delivery cells are the two
middle cells of the bottom row, (width // 2 - 1, height - 1) then (width // 2, height - 1).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hdppo.errors import ScenarioError

SIZES = {"tiny": (1, 3), "small": (2, 3), "medium": (2, 5), "large": (3, 5)}   # (shelf rows, shelf columns)
SIZE = re.compile(r"(tiny|small|medium|large)-([1-9]|1[0-9])ag")
COLUMN_HEIGHT = 8
MAX_STEPS = 500


@dataclass(frozen=True)
class Layout:
    """One rware warehouse: `highways` [H, W] bool, `goals` [G, 2] and `shelf_cells` [S, 2] as (x, y)."""

    size: str
    hard: bool
    height: int
    width: int
    n_agents: int
    queue_size: int
    highways: np.ndarray
    goals: np.ndarray
    shelf_cells: np.ndarray

    @property
    def grid_size(self) -> tuple[int, int]:
        """(height, width), as rware's `grid_size`."""
        return self.height, self.width

    @property
    def n_shelves(self) -> int:
        return len(self.shelf_cells)


def layout(size: str, hard: bool = False) -> Layout:
    """The layout of `rware-{size}[-hard]-v2`, e.g. layout("tiny-4ag", hard=True)."""
    m = SIZE.fullmatch(size)
    if m is None:
        raise ScenarioError(f"rware size {size!r} is not one rware registers",
                            "use {tiny,small,medium,large}-Nag with 1 <= N <= 19, e.g. tiny-4ag")
    rows, cols = SIZES[m.group(1)]
    n_agents = int(m.group(2))
    queue = int(n_agents * (0.5 if hard else 1))
    if queue < 1:
        raise ScenarioError(f"rware size={size} hard=true requests no shelf", "use hard=false or more robots")
    h, w = (COLUMN_HEIGHT + 1) * rows + 2, 3 * cols + 1
    y, x = np.indices((h, w))
    queue_cells = (y > h - (COLUMN_HEIGHT + 3)) & ((x == w // 2 - 1) | (x == w // 2))
    highways = (x % 3 == 0) | (y % (COLUMN_HEIGHT + 1) == 0) | (y == h - 1) | queue_cells
    ys, xs = np.nonzero(~highways)                       # row-major: rware's shelf order
    goals = np.array([(w // 2 - 1, h - 1), (w // 2, h - 1)], np.int64)
    for a in (highways, goals):
        a.setflags(write=False)
    cells = np.stack([xs, ys], axis=1).astype(np.int64)
    cells.setflags(write=False)
    return Layout(size, bool(hard), h, w, n_agents, queue, highways, goals, cells)
