"""What a HierarchyEnv refuses at a step: actions of the wrong shape, env output of the wrong shape,
non-finite env output. The shape checks compare shapes only (a few tuples per step); per-unit
observations are checked where the PettingZoo adapter turns them into arrays
(`hdppo.sims.pettingzoo`), a native batch's arrays here."""
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


def check_shapes(env: BatchedEnv, t: np.ndarray, scenario: str, step: EnvStep | None = None) -> None:
    """Refuse a batch whose arrays are not [E, U, D] observations and [E, U] alive flags (and, after
    a step, [E, U] rewards and flags, [E] done): numpy would broadcast them silently."""
    E, U = env.n_envs, len(env.units)
    want = {"obs": (E, U) + tuple(env.obs_space.shape), "alive": (E, U)}
    got = {"obs": np.shape(env.obs), "alive": np.shape(env.alive)}
    if step is not None:
        want.update(rewards=(E, U), terminated=(E, U), truncated=(E, U), done=(E,))
        got.update(rewards=np.shape(step.rewards), terminated=np.shape(step.terminated),
                   truncated=np.shape(step.truncated), done=np.shape(step.done))
    if got != want:
        name = next(k for k in want if got[k] != want[k])
        when = f"after the step at episode step {int(t.max())}" if step is not None else "after a reset"
        raise ScenarioError(f"the env's {name} array has shape {got[name]}, expected {want[name]} "
                            f"(copies x units{' x features' if name == 'obs' else ''}) {when}",
                            f"give {name} one entry per copy and unit ({E} x {U}) as the BatchedEnv interface says",
                            where=f"scenario {scenario!r}")
