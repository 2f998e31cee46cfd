"""Goal books the runtime puts into a HierarchyEnv in place of its own: one that keeps the caller's
orders over the parent's choice (`Team.act(goals=...)`), one that counts success per goal value
(`hdppo eval`). Both keep the replaced book's arrays, so the hierarchy's views of them stay valid."""
from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from hdppo.team.goals import GoalBook


class RuntimeBook(GoalBook):
    """A GoalBook with state of its own beyond the replaced book's (made by `init_extra`)."""

    def init_extra(self) -> None:
        """Set up the subclass's own state after the replaced book's arrays are copied in (none here)."""


Book = TypeVar("Book", bound=RuntimeBook)


def replace_book(hier: Any, i: int, cls: type[Book]) -> Book:
    """Layer i's goal book, as an instance of `cls` holding the same arrays and counts."""
    old = hier.layers[i].goals
    new = cls.__new__(cls)
    new.__dict__.update(old.__dict__)
    new.init_extra()
    hier.layers[i].goals = new
    return new


class OrderedBook(RuntimeBook):
    """Goals with the caller's orders: an ordered node holds its goal whenever its parent assigns."""

    def init_extra(self) -> None:
        self.orders: dict[int, np.ndarray] = {}      # node index -> goal, for the current step only

    def hold(self, orders: dict[int, np.ndarray]) -> None:
        """Give the ordered nodes their goals now (copy 0, the team's one copy) and keep them over
        the parent's assignments until `release`."""
        self.orders = orders
        which = np.zeros(self.set.shape, dtype=bool)
        new = np.zeros_like(self.goals)
        for k, goal in orders.items():
            which[0, k] = True
            new[0, k] = goal
        if which.any():
            super().assign(which, new)

    def release(self) -> None:
        self.orders = {}

    def assign(self, which: np.ndarray, new: np.ndarray) -> None:
        if self.orders:
            new = new.copy()
            for k, goal in self.orders.items():
                new[:, k] = goal
        super().assign(which, new)


class TallyBook(RuntimeBook):
    """Goals whose finished and achieved counts are also kept per goal value (Discrete goals)."""

    def init_extra(self) -> None:
        self.by_goal: dict[int, list[int]] = {}      # goal value -> [finished, achieved]

    def finish(self, which: np.ndarray) -> None:
        ending = which & self.set
        if ending.any() and self.goals.ndim == 2:
            for goal, ok in zip(self.goals[ending].tolist(), self.achieved[ending].tolist()):
                count = self.by_goal.setdefault(int(goal), [0, 0])
                count[0] += 1
                count[1] += int(ok)
        super().finish(which)


def tally_books(hier: Any) -> dict[str, TallyBook]:
    """A TallyBook in each layer whose goals have a goal_success test, by the receiving layer's name."""
    return {hier.specs[i].name: replace_book(hier, i, TallyBook)
            for i in range(1, hier.n_layers) if hier.specs[i - 1].goal_success is not None}
