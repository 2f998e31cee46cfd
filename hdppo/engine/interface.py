"""A layer's interface as its checkpoint records it (the widths of the parts of its observation, its
action space), and the check that refuses a checkpoint loaded where that interface differs,
naming the differing part: frozen skills reused in another scenario or map must observe the same
parts at the same widths and act in the same space."""
from __future__ import annotations

import gymnasium as gym

from hdppo.engine.checkpoint import CheckpointError
from hdppo.engine.messages import LayerInfo

PARTS = {"features": "observation width (own features)", "goal_features": "goal feature width",
         "child_features": "child feature width", "child_position": "family size (children per node)"}


def obs_parts(info: LayerInfo) -> dict[str, int]:
    """The width of each part of one slot's observation, in order (they sum to info.obs_dim)."""
    parts = {"features": int(info.feature_space.shape[0])}
    if info.goal_feature_space is not None:
        parts["goal_features"] = int(info.goal_feature_space.shape[0])
    if info.choice == "per_child":
        parts["child_features"] = info.obs_dim - sum(parts.values()) - info.max_children
        parts["child_position"] = info.max_children
    return parts


def check_interface(meta: dict, info: LayerInfo, goal_space: gym.Space | None, what: str) -> None:
    """CheckpointError, naming each differing part, when the checkpoint's layer was trained on
    another interface than `info`'s; `goal_space` is the goal space of the layer above, named when
    the goal features differ. Checkpoints that predate `obs_parts` are compared on obs_dim."""
    saved = meta.get("obs_parts")
    here = obs_parts(info)
    diffs = []
    if isinstance(saved, dict):
        for key in dict.fromkeys([*saved, *here]):
            if saved.get(key, 0) != here.get(key, 0):
                space = f" (goal space {goal_space})" if key == "goal_features" and goal_space is not None else ""
                diffs.append(f"{PARTS.get(key, key)} {saved.get(key, 0)} in the checkpoint, {here.get(key, 0)} "
                             f"here{space}")
    elif meta.get("obs_dim") != info.obs_dim:
        diffs.append(f"observation width {meta.get('obs_dim')} in the checkpoint, {info.obs_dim} here "
                     "(all parts: the checkpoint records no widths per part)")
    if meta.get("action_space") != repr(info.action_space):
        diffs.append(f"action space {meta.get('action_space')} in the checkpoint, {info.action_space!r} here")
    if diffs:
        raise CheckpointError(f"{what} is incompatible with layer {info.name!r} here: {'; '.join(diffs)}; "
                              f"load a checkpoint trained where layer {info.name!r} observes and acts the same "
                              f"(same unit observation and goal grounding), or train {info.name!r} here")
