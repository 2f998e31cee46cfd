"""rps: PettingZoo classic rock-paper-scissors, flat (one layer), against a predictable bot.

The smallest possible scenario: one `low` layer (plain DPPO), one unit (`player_0`) and one
opponent (`player_1`) that cycles rock -> paper -> scissors. The env's observation is a
Discrete(4) (the opponent's last move, 3 = none yet); hdppo wants Box observations, so the env is
wrapped with SuperSuit to give a one-hot Box(4) instead.

    hdppo check examples/scenarios/rps.py
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, Opponents, Scenario, ScenarioConfig


@dataclass
class RpsConfig(ScenarioConfig):
    rounds: int = 15


def make_env(cfg: RpsConfig):
    import supersuit
    from pettingzoo.classic import rps_v2
    env = rps_v2.parallel_env(max_cycles=cfg.rounds)
    one_hot = np.eye(4, dtype=np.float32)
    return supersuit.observation_lambda_v0(env, lambda obs, space: one_hot[int(obs)],
                                           lambda space: spaces.Box(0.0, 1.0, (4,), np.float32))


def cycler(cfg: RpsConfig, env):
    """Plays 0, 1, 2, 0, ... (rock, paper, scissors) whatever it sees."""
    count = iter(range(10**12))
    return lambda observations: {a: next(count) % 3 for a in observations}


SCENARIO = Scenario(
    name="rps",
    description="PettingZoo classic rock-paper-scissors: one flat unit vs a cycling bot",
    env=make_env,
    graph=lambda cfg, agents: AgentGraph.groups(["player_0"]),        # one layer: 'low'
    layers=lambda cfg: [Layer("low")],
    config=RpsConfig,
    opponents=Opponents(agents=lambda agents: ["player_1"], controller=cycler))
