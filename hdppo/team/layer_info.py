"""Each layer's static description (LayerInfo): its slots, observation and action spaces, schedule.

A node's own features: the env observation (bottom), the `observe` hook's space, or the default
aggregate of its children (masked mean, max, fraction alive); [+ the env state with use_state].
A slot observes its node's features and grounded goal; a per_child slot also its child's features
and the child's position one-hot.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from hdppo.errors import ScenarioError
from hdppo.sims.base import BatchedEnv
from hdppo.team.attention import check_layout
from hdppo.team.interfaces import LayerInfo
from hdppo.team.scenario import Layer
from hdppo.team.topology import LayerTopology


def concat_boxes(*boxes: gym.spaces.Box) -> gym.spaces.Box:
    low = np.concatenate([b.low.reshape(-1) for b in boxes]).astype(np.float32)
    high = np.concatenate([b.high.reshape(-1) for b in boxes]).astype(np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def _with_zero(box: gym.spaces.Box) -> gym.spaces.Box:
    return gym.spaces.Box(np.minimum(box.low, 0), np.maximum(box.high, 0), dtype=np.float32)


def feature_spaces(specs: list[Layer], env: BatchedEnv, scenario: str) -> list[gym.spaces.Box]:
    """Every layer's own-feature space, bottom-up."""
    spaces: list[gym.spaces.Box] = []
    for i in reversed(range(len(specs))):
        spec = specs[i]
        if i == len(specs) - 1:
            box = env.obs_space
        elif spec.observe is not None:
            assert spec.observe_space is not None          # Scenario.build_layers checked it
            box = spec.observe_space
        else:
            below = _with_zero(spaces[0])
            box = concat_boxes(below, below, gym.spaces.Box(0.0, 1.0, (1,), np.float32))
        if spec.use_state:
            if env.state_space is None:
                raise ScenarioError(f"layer {spec.name!r} has use_state=True but the env has no state()",
                                    "set use_state=False or give the env a state_space and state()",
                                    where=f"scenario {scenario!r}")
            box = concat_boxes(box, env.state_space)
        spaces.insert(0, box)
    return spaces


def goal_feature_space(specs: list[Layer], i: int) -> gym.spaces.Box | None:
    """The space of the grounded goal layer i's nodes observe (None at the top)."""
    if i == 0:
        return None
    parent = specs[i - 1]
    if parent.goal_features_space is not None:
        return parent.goal_features_space
    space = parent.goal_space
    if isinstance(space, gym.spaces.Discrete):
        return gym.spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
    assert isinstance(space, gym.spaces.Box)
    return gym.spaces.Box(space.low.reshape(-1).astype(np.float32), space.high.reshape(-1).astype(np.float32),
                          dtype=np.float32)


def build_infos(specs: list[Layer], nodes: list[list], env: BatchedEnv, topology: list[LayerTopology],
                scenario: str) -> list[LayerInfo]:
    """LayerInfo of every layer, top to bottom; nodes[i] are layer i's node names."""
    fspaces = feature_spaces(specs, env, scenario)
    infos = []
    last = len(specs) - 1
    for i, spec in enumerate(specs):
        gspace = goal_feature_space(specs, i)
        fspace = fspaces[i]
        if spec.attend is not None:          # dropped features read 0
            check_layout(spec, int(fspace.shape[0]), scenario)
            fspace = _with_zero(fspace)
        own = concat_boxes(fspace, gspace) if gspace is not None else fspace
        idx = topology[i].idx
        c = 0 if idx is None else idx.shape[2]
        roles = np.arange(len(nodes[i]))
        if i == last:
            slots, obs, act, choice = [str(n) for n in nodes[i]], own, env.action_space, None
        elif spec.choice == "per_child":
            assert spec.goal_space is not None       # upper layers have one (Scenario.build_layers)
            slots = [f"{n}/{j}" for n in nodes[i] for j in range(c)]
            obs = concat_boxes(own, fspaces[i + 1], gym.spaces.Box(0.0, 1.0, (c,), np.float32))
            act, choice = spec.goal_space, "per_child"
            roles = np.tile(np.arange(c), len(nodes[i]))
        else:
            assert spec.goal_space is not None
            slots, obs, act, choice = [str(n) for n in nodes[i]], own, spec.goal_space, "broadcast"
        infos.append(LayerInfo(spec.name, i, spec.interval, nodes[i], slots, choice, obs, act, fspaces[i],
                               gspace, c, roles))
    return infos
