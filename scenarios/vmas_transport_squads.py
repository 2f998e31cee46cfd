"""vmas_transport_squads: VMAS transport with 2 packages, 6 robots in 2 squads of 3 under a commander.

The commander tells each squad which package to push; a squad tells each of its robots which
package to push (both grounded as [package - receiver, package - goal] read from the robots'
observations, for a squad the mean over its robots); robots push, rewarded by the env (the
packages' progress to the shared goal, x100, shared by all) plus, weighted by w_int.low (0.1,
`w_int.low=0` removes it), minus their distance to their package. Other task parameters as
BenchMARL's transport (0.15 x 0.15 packages of mass 50, 100 steps). `layers=1` is the flat team.

Unit observation (VMAS transport): pos (2), vel (2), then per package: package - goal (2),
package - robot (2), package velocity (2), on goal (1).
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from hdppo import Layer, LayerContext
from hdppo.sims.vmas import team_graph, vmas_scenario

PACKAGE_OFFSET, PACKAGE_WIDTH = 4, 7
TOUCH = 0.12              # a robot touches its package within this distance of the package's centre


def _package(features: np.ndarray, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(package - receiver [E, N, 2], package - goal [E, N, 2], on goal [E, N]) of each node's package."""
    start = PACKAGE_OFFSET + PACKAGE_WIDTH * goals.astype(np.int64)            # [E, N]
    cols = start[..., None] + np.arange(PACKAGE_WIDTH)                          # [E, N, 7]
    block = np.take_along_axis(features, cols, axis=-1)
    return block[..., 2:4], block[..., 0:2], block[..., 6]


def make_layers(cfg) -> list[Layer]:
    if cfg.layers == 1:
        return [Layer("low")]
    goal: spaces.Discrete = spaces.Discrete(cfg.n_packages)
    grounded = spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def ground(goals: np.ndarray, ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None                 # every hook but `observe` sees the features
        to_pkg, pkg_goal, _ = _package(ctx.features, goals)
        return np.concatenate([to_pkg, pkg_goal], axis=-1).astype(np.float32)

    def delivered(ctx: LayerContext) -> np.ndarray:
        assert ctx.features is not None
        return _package(ctx.features, ctx.goals)[2] > 0.5

    def touching(ctx: LayerContext) -> np.ndarray:
        return np.linalg.norm(ctx.goal_features[..., 0:2], axis=-1) < TOUCH

    def approach(ctx: LayerContext) -> np.ndarray:
        return -np.linalg.norm(ctx.goal_features[..., 0:2], axis=-1)

    return [Layer("high", interval=20, goal_space=goal, goal_features=ground, goal_features_space=grounded,
                  goal_success=delivered),
            Layer("mid", interval=10, goal_space=goal, goal_features=ground, goal_features_space=grounded,
                  goal_success=touching),
            Layer("low", intrinsic=approach, w_int=0.1)]


SCENARIO = vmas_scenario(
    "transport", name="vmas_transport_squads",
    description="VMAS transport, 2 packages: commander -> 2 squads of 3 robots -> robots",
    make_layers=make_layers, make_graph=team_graph,
    max_steps=100, layers=3, squad_size=3,
    n_agents=6, n_packages=2, package_width=0.15, package_length=0.15, package_mass=50)
