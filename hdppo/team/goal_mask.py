"""Goal masks: an upper layer with `goal_mask(ctx)` chooses only the goals the hook allows.

The hook runs on the deciding layer's context at each of its decisions and returns bool [E, N, n]
for a Discrete(n) goal space: which goals each node may give its children now (every child of a
node gets the same choice; a `per_child` node's slots all take its row). The mask reaches the
layer's policy as the decision's action mask, exactly as a unit's legal actions do: sampling, the
learner's log-probabilities and entropies, a uniform or deployed policy all honour it. A node
left with no legal goal may give any (the policy needs one legal choice), so a hook needs no
special case for the end of an episode. Goals a caller sets by hand (`team.act(goals=...)`) are
not checked against it.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.team.scenario import Layer, LayerContext


def legal_goals(spec: Layer, ctx: LayerContext, scenario: str) -> np.ndarray:
    """The goals each node may give, bool [E, N, n] from spec.goal_mask (a row of none: all of them)."""
    assert spec.goal_mask is not None and isinstance(spec.goal_space, gym.spaces.Discrete)
    E, N = ctx.alive.shape
    want = (E, N, int(spec.goal_space.n))
    legal = np.asarray(spec.goal_mask(ctx))
    if legal.shape != want or legal.dtype != bool:
        raise ScenarioError(f"goal_mask of layer {spec.name!r} returned {legal.dtype} {legal.shape}, expected bool "
                            f"{want}", "return a bool array [E, N, n]: True where the node may give goal k",
                            where=f"scenario {scenario!r}")
    return legal | ~legal.any(-1, keepdims=True)
