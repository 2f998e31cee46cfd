"""Goal masks: an upper layer with `goal_mask(ctx)` chooses only the goals the hook allows.

The hook runs on the deciding layer's context at each of its decisions and returns, for a
Discrete(n) goal space, bool [E, N, n]: which goals each node may give its children now (every
child of a node gets the same choice; a `per_child` node's slots all take its row), or, on a
`per_child` layer, bool [E, N, C, n]: a row per child slot (C: the layer's most children per node),
e.g. to keep a child on the goal it holds (`ctx.child_goals`, `ctx.child_holds`) until that goal is
done. The mask reaches the layer's policy as the decision's action mask, exactly as a unit's legal
actions do: sampling, the learner's log-probabilities and entropies, a uniform or deployed policy
all honour it. A slot left with no legal goal may give any (the policy needs one legal choice), so
a hook needs no special case for the end of an episode. Goals a caller sets by hand
(`team.act(goals=...)`) are not checked against it.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.team.scenario import Layer, LayerContext


def legal_goals(spec: Layer, ctx: LayerContext, scenario: str, children: int | None = None) -> np.ndarray:
    """The goals each node (bool [E, N, n]) or, from a per-child hook on a per_child layer of at
    most `children` children per node, each child slot ([E, N, C, n]) may give; a row of none: all."""
    assert spec.goal_mask is not None and isinstance(spec.goal_space, gym.spaces.Discrete)
    E, N = ctx.alive.shape
    n = int(spec.goal_space.n)
    legal = np.asarray(spec.goal_mask(ctx))
    shapes = [(E, N, n)] + ([(E, N, children, n)] if spec.choice == "per_child" and children else [])
    if legal.shape not in shapes or legal.dtype != bool:
        want = " or ".join(str(w) for w in shapes)
        raise ScenarioError(f"goal_mask of layer {spec.name!r} returned {legal.dtype} {legal.shape}, expected bool "
                            f"{want}", "return a bool array [E, N, n] (per node)"
                            + (" or [E, N, C, n] (per child slot)" if len(shapes) > 1 else "")
                            + ": True where the node may give goal k", where=f"scenario {scenario!r}")
    return legal | ~legal.any(-1, keepdims=True)
