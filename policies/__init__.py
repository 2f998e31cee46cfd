"""Network modules: action heads, the MLP actor-critic and per-layer policy factories."""

from .factory import POLICIES, PolicyBuilder, PolicySpec, make_policy, register_policy
from .heads import (
    ActionHead,
    BoxHead,
    DiagGaussian,
    DiscreteHead,
    MaskedCategorical,
    MultiCategorical,
    MultiDiscreteHead,
    make_head,
)
from .mlp import ACTIVATIONS, ActorCritic

__all__ = [
    "ACTIVATIONS",
    "POLICIES",
    "ActionHead",
    "ActorCritic",
    "BoxHead",
    "DiagGaussian",
    "DiscreteHead",
    "MaskedCategorical",
    "MultiCategorical",
    "MultiDiscreteHead",
    "PolicyBuilder",
    "PolicySpec",
    "make_head",
    "make_policy",
    "register_policy",
]
