"""A tiny PettingZoo env with scripted rewards and deaths, for exact hierarchy tests."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario, ScenarioConfig


def reward_of(t: int, i: int) -> float:
    """Unit i's env reward at step t: distinct per (t, i) so sums reveal any mix-up."""
    return float((i + 1) * 10 + t + 1) * (1 if i % 2 == 0 else -0.5)


class ScriptedEnv(ParallelEnv):
    """Units `u0..` get reward_of(t, i); unit i is terminated at step deaths[i]; truncation at max_steps.

    It refuses actions for agents that are not alive, so a hierarchy that acts for a dead unit fails.
    """

    metadata = {"name": "scripted_v0", "render_modes": []}

    def __init__(self, n_units: int = 4, max_steps: int = 8, deaths: dict[int, int] | None = None) -> None:
        self.n_units, self.max_steps = n_units, max_steps
        self.deaths = deaths or {}
        self.possible_agents = [f"u{i}" for i in range(n_units)]
        self.render_mode = None
        self.t = 0
        self.agents: list[str] = []

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(-1.0, 1.0, (3,), np.float32)

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self, agent):
        i = self.possible_agents.index(agent)
        return np.array([i / self.n_units, self.t / self.max_steps, 1.0], dtype=np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        stray = set(actions) - set(self.agents)
        if stray:
            raise AssertionError(f"actions given for agents that are not alive: {sorted(stray)}")
        rew, term, trunc = {}, {}, {}
        for a in self.agents:
            i = self.possible_agents.index(a)
            rew[a] = reward_of(self.t, i)
            term[a] = self.deaths.get(i) == self.t
            trunc[a] = self.t + 1 >= self.max_steps and not term[a]
        self.t += 1
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, infos


@dataclass
class ScriptedConfig(ScenarioConfig):
    n_units: int = 4
    squad_size: int = 2
    max_steps: int = 8
    deaths: dict[str, int] = field(default_factory=dict)   # unit index (as str) -> death step
    choice: str = "per_child"
    mid_interval: int = 2
    high_interval: int = 4


def make_scenario(**kw) -> tuple[Scenario, ScriptedConfig]:
    """A 3-layer scenario over ScriptedEnv (commander -> squads -> units) and its config."""
    def env(cfg):
        return ScriptedEnv(cfg.n_units, cfg.max_steps, {int(k): v for k, v in cfg.deaths.items()})

    def graph(cfg, agents):
        return AgentGraph.groups(agents, [cfg.squad_size])

    def layers(cfg):
        n_squads = cfg.n_units // cfg.squad_size
        return [Layer("high", interval=cfg.high_interval, goal_space=spaces.Discrete(n_squads), choice=cfg.choice),
                Layer("mid", interval=cfg.mid_interval, goal_space=spaces.Discrete(3), choice=cfg.choice),
                Layer("low", interval=1)]

    scenario = Scenario("scripted", "scripted rewards and deaths", env=env, graph=graph, layers=layers,
                        config=ScriptedConfig)
    return scenario, scenario.make_config(kw)
