"""Per-layer policy construction from a small spec; a registry lets a config string pick the kind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gymnasium import spaces

from .mlp import ActorCritic

__all__ = ["PolicySpec", "PolicyBuilder", "POLICIES", "register_policy", "make_policy"]


@dataclass(frozen=True)
class PolicySpec:
    """What a layer's policy looks like.

    ``centralized=True`` gives the critic its own input (e.g. the layer's joint state) of width
    ``critic_obs_dim``; the width may also be supplied at build time to :func:`make_policy`.
    """

    kind: str = "mlp"
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    n_roles: int = 0
    role_dim: int = 8
    centralized: bool = False
    critic_obs_dim: int | None = None
    log_std_init: float = 0.0
    value_norm: bool = False


# what the engine trains, checkpoints and exports is an ActorCritic (its act / evaluate / value, heads
# and bodies): another kind of network subclasses it
PolicyBuilder = Callable[[int, spaces.Space, PolicySpec, "int | None"], ActorCritic]


def _build_mlp(
    obs_dim: int, action_space: spaces.Space, spec: PolicySpec, critic_obs_dim: int | None
) -> ActorCritic:
    return ActorCritic(
        obs_dim,
        action_space,
        hidden=tuple(spec.hidden),
        activation=spec.activation,
        n_roles=spec.n_roles,
        critic_obs_dim=critic_obs_dim,
        role_dim=spec.role_dim,
        log_std_init=spec.log_std_init,
        value_norm=spec.value_norm,
    )


POLICIES: dict[str, PolicyBuilder] = {"mlp": _build_mlp}


def register_policy(name: str, builder: PolicyBuilder) -> None:
    """Make ``builder(obs_dim, action_space, spec, critic_obs_dim) -> ActorCritic`` selectable as ``kind=name``."""
    POLICIES[name] = builder


def make_policy(
    obs_dim: int,
    action_space: spaces.Space,
    spec: PolicySpec | None = None,
    critic_obs_dim: int | None = None,
) -> ActorCritic:
    """Build the policy ``spec.kind`` for one layer.

    The critic is centralized iff ``spec.centralized``; its width is ``critic_obs_dim`` if given,
    else ``spec.critic_obs_dim``. Raises ``ValueError`` for an unknown kind or a centralized spec
    without a critic width.
    """
    spec = spec or PolicySpec()
    if spec.kind not in POLICIES:
        raise ValueError(
            f"unknown policy kind {spec.kind!r}; known: {', '.join(sorted(POLICIES))}"
        )
    width = None
    if spec.centralized:
        width = critic_obs_dim if critic_obs_dim is not None else spec.critic_obs_dim
        if width is None:
            raise ValueError("centralized critic needs critic_obs_dim (in the spec or the call)")
    return POLICIES[spec.kind](int(obs_dim), action_space, spec, width)
