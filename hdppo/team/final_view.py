"""Decision observations at a time limit, with the truncated units counted as alive.

After the env step PettingZoo has removed every truncated unit, so the plain post-step view of a
parent at a time limit is "no living child" (all-zero features), a state no decision ever saw.
Bootstrapping truncation needs the state the layer would have decided in: here the post-step
observations with the truncated units alive (units that terminated stay dead).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from hdppo.team import aggregate as agg


class Views(Protocol):
    """What the final view swaps and calls in a HierarchyEnv (typed here so this module need not import it)."""

    n_layers: int
    alive: list[np.ndarray]
    _feat: list[np.ndarray | None]
    _goal_feat: list[np.ndarray | None]
    _slot_alive: list[np.ndarray | None]

    @property
    def idx(self) -> list[np.ndarray]: ...

    @property
    def struct(self) -> list[np.ndarray]: ...

    def decision_obs(self, i: int) -> np.ndarray: ...


class FinalView:
    def __init__(self, hier: Views, truncated_units: np.ndarray) -> None:
        L = hier.n_layers
        self.hier = hier
        self.alive: list[np.ndarray] = [hier.alive[-1] | truncated_units]
        for i in reversed(range(L - 1)):
            self.alive.insert(0, agg.any_children(self.alive[0], hier.idx[i], hier.struct[i]))
        self.feat: list[np.ndarray | None] = [None] * L
        self.feat[-1] = hier._feat[-1]
        self.goal_feat: list[np.ndarray | None] = [None] * L
        self.slot_alive: list[np.ndarray | None] = [None] * L

    def decision_obs(self, i: int) -> np.ndarray:
        with self._installed():
            return self.hier.decision_obs(i)

    @contextlib.contextmanager
    def _installed(self) -> Iterator[None]:
        """Swap this view's alive flags and caches into the hierarchy (its methods fill them)."""
        h = self.hier
        saved = h.alive, h._feat, h._goal_feat, h._slot_alive
        h.alive, h._feat, h._goal_feat, h._slot_alive = self.alive, self.feat, self.goal_feat, self.slot_alive
        try:
            yield
        finally:
            h.alive, h._feat, h._goal_feat, h._slot_alive = saved
