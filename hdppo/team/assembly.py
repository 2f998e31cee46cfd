"""Assembling a scenario's pieces: its batched env and its validated agent graph."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from hdppo.errors import ConfigError, ScenarioError
from hdppo.sims.base import BatchedEnv
from hdppo.sims.pettingzoo import PettingZooBatch
from hdppo.team.graph import AgentGraph
from hdppo.team.scenario import Layer, Scenario


def make_env_and_graph(scenario: Scenario, cfg: Any, n_envs: int, seed: int | None,
                       specs: list[Layer]) -> tuple[BatchedEnv, AgentGraph]:
    """The scenario's batched env (native, or copies of its PettingZoo env) and its validated graph."""
    where = f"scenario {scenario.name!r}"
    batched_env = scenario.batched_env
    if batched_env is not None:
        if scenario.episode_info is not None:
            raise ScenarioError("the scenario gives both batched_env and an episode_info(env) hook, which is for "
                                "PettingZoo scenarios", "drop Scenario(episode_info=...) and implement "
                                "episode_info(e) on the BatchedEnv (it knows every copy)", where=where)
        env = _call(lambda: batched_env(cfg, n_envs, seed), "batched_env(cfg, n_envs, seed)", where)
        return env, build_graph(scenario, cfg, list(env.units), [], specs)
    probe = _call(lambda: scenario.env(cfg), "env(cfg)", where)
    agents = list(probe.possible_agents)
    probe.close()
    opp = scenario.opponents
    opponents = [] if opp is None else list(_call(lambda: opp.agents(agents),
                                                  "opponents.agents(possible_agents)", where))
    graph = build_graph(scenario, cfg, agents, opponents, specs)   # before the adapter indexes agents by leaf
    controller = None if opp is None else (lambda i, e: opp.controller(cfg, e))
    units = cast(list[str], graph.units)           # the leaves, checked above to be the env's agent names
    env = PettingZooBatch(lambda: scenario.env(cfg), units, n_envs, controller, scenario.episode_info)
    return env, graph


def build_graph(scenario: Scenario, cfg: Any, env_agents: list[str], opponents: list[str],
                specs: list[Layer]) -> AgentGraph:
    """The scenario's graph, validated against the env's agents, its opponents and the layer specs."""
    where = f"scenario {scenario.name!r}"
    graph = _call(lambda: scenario.graph(cfg, env_agents), "graph(cfg, agents)", where)
    if not isinstance(graph, AgentGraph):
        raise ScenarioError(f"graph(cfg, agents) returned a {type(graph).__name__}, not an AgentGraph",
                            "return AgentGraph(...) or AgentGraph.groups(...)", where=where)
    try:
        graph.validate(env_agents, opponents, [s.name for s in specs])
    except ScenarioError as exc:
        raise ScenarioError(exc.problem, exc.fix, where=where) from None
    order = [a for a in env_agents if a in set(graph.units)]
    if list(graph.units) != order:
        raise ScenarioError(f"the graph's units {list(graph.units)[:6]} are not in the env's agent order "
                            f"{order[:6]}", "list the leaves in the env's possible_agents order", where=where)
    return graph


def _call(fn: Callable[[], Any], what: str, where: str) -> Any:
    try:
        return fn()
    except ScenarioError:
        raise
    except ConfigError as exc:          # a config value the hook refuses: its own fix, not "fix the function"
        raise ConfigError(exc.problem, exc.fix, where=exc.where or where) from None
    except Exception as exc:
        raise ScenarioError(f"{what} raised {type(exc).__name__}: {exc}",
                            f"fix the scenario's {what.split('(')[0]} function (run with --debug for the traceback)",
                            where=where) from exc
