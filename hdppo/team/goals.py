"""The goals one layer's nodes received from their parents, and whether each goal was achieved."""
from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.team import aggregate as agg

if TYPE_CHECKING:
    from hdppo.team.scenario import Layer, LayerContext


class GoalBook:
    """Goals [E, N] (Discrete) or [E, N, *shape] (Box) of one layer's nodes; a goal is set when the
    parent decides for the node and finishes when it is replaced or the episode ends. Counts of
    finished and achieved goals accumulate until popped."""

    def __init__(self, n_envs: int, n_nodes: int, space: gym.Space) -> None:
        if isinstance(space, gym.spaces.Discrete):
            self.goals = np.zeros((n_envs, n_nodes), dtype=np.int64)
        else:
            self.goals = np.zeros((n_envs, n_nodes) + tuple(space.shape or ()), dtype=np.float32)
        self.set = np.zeros((n_envs, n_nodes), dtype=bool)
        self.achieved = np.zeros((n_envs, n_nodes), dtype=bool)
        self.finished_count = 0
        self.achieved_count = 0

    def reset(self, envs: np.ndarray) -> None:
        self.goals[envs] = 0
        self.set[envs] = False
        self.achieved[envs] = False

    def assign(self, which: np.ndarray, new: np.ndarray) -> None:
        """Nodes in which [E, N] get new goals (new [E, N, ...]); their previous goals finish."""
        self.finish(which)
        self.goals[which] = new[which]
        self.set[which] = True
        self.achieved[which] = False

    def finish(self, which: np.ndarray) -> None:
        """The goals of the nodes in which [E, N] end now (replaced, or the episode is over)."""
        ending = which & self.set
        self.finished_count += int(ending.sum())
        self.achieved_count += int((ending & self.achieved).sum())
        self.set[which] = False

    def mark_achieved(self, ok: np.ndarray) -> None:
        """Goals the parent's goal_success test passed at this step (a set goal stays achieved)."""
        self.achieved |= ok & self.set

    def pop_counts(self) -> tuple[int, int]:
        """(goals finished, goals achieved) since the last call."""
        out = (self.finished_count, self.achieved_count)
        self.finished_count = self.achieved_count = 0
        return out


def ground_goals(parent: Layer, goals: np.ndarray, ctx: LayerContext, n_children: int, scenario: str) -> np.ndarray:
    """The goals `parent` gave its children, as the features the children observe [E, N, F]: the
    parent's goal_features hook (shape-checked), else one-hot (Discrete) or the raw vector (Box)."""
    if parent.goal_features is not None:
        out = np.asarray(parent.goal_features(goals, ctx), dtype=np.float32)
        assert parent.goal_features_space is not None and parent.goal_features_space.shape is not None
        want = (goals.shape[0], n_children, parent.goal_features_space.shape[0])
        if out.shape != want:
            raise ScenarioError(f"goal_features of layer {parent.name!r} returned shape {out.shape}, "
                                f"expected {want}", "return [E, N_children, F] matching goal_features_space",
                                where=f"scenario {scenario!r}")
        return out
    if isinstance(parent.goal_space, gym.spaces.Discrete):
        return agg.one_hot(goals, int(parent.goal_space.n))
    return goals.reshape(goals.shape[0], goals.shape[1], -1).astype(np.float32)
