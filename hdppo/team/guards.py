"""What a HierarchyEnv refuses at a step: actions of the wrong shape, non-finite env output."""
from __future__ import annotations

from typing import Any

import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import BatchedEnv, EnvStep
from hdppo.team.interfaces import LayerInfo


def check_actions(info: LayerInfo, actions: Any, n_envs: int) -> np.ndarray:
    """A layer's actions as an array [E, S, *action_shape], or a ValueError naming the layer."""
    a = np.asarray(actions)
    want = (n_envs, info.n_slots) + tuple(info.action_space.shape or ())
    if a.shape != want:
        raise ValueError(f"layer {info.name!r} got actions of shape {a.shape}, expected {want}")
    return a


def check_finite(step: EnvStep, env: BatchedEnv, t: np.ndarray, scenario: str) -> None:
    """Refuse NaN or infinite observations and rewards, naming the unit and the copy."""
    for what, arr in (("reward", step.rewards), ("observation", env.obs)):
        if not np.isfinite(arr).all():
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise ScenarioError(f"the env gave a non-finite {what} to unit {env.units[bad[1]]!r} "
                                f"(copy {bad[0]}, episode step {t[bad[0]]})",
                                "fix the env (or wrap it to clip/replace NaN) before training on it",
                                where=f"scenario {scenario!r}")
