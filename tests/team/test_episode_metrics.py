"""A PettingZoo scenario reports episode metrics: the `Scenario(episode_info=...)` hook on the copy,
or an `infos[agent]["episode"]` mapping on the last step. They join each finished episode's record,
so `hdppo eval`'s outcomes show them (and run.csv, TensorBoard and `hdppo plot`: tests/team/slow).

Before: only a native BatchedEnv had episode_info(e); a PettingZoo scenario's eval said `outcomes: {}`.
"""
from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest

from hdppo.errors import ScenarioError
from hdppo.runtime.evaluate import evaluate
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Scenario, load_scenario
from tests.helpers.runtime import make_run
from tests.helpers.scripted_env import ScriptedEnv, make_scenario

# a user's scenario file: ScriptedEnv whose units report infos["episode"] on their last step, and a hook
USER_SCENARIO = textwrap.dedent('''
    from gymnasium import spaces

    from hdppo import AgentGraph, Layer, Scenario
    from tests.helpers.scripted_env import ScriptedConfig, ScriptedEnv


    class Reporting(ScriptedEnv):
        def step(self, actions):
            obs, rew, term, trunc, infos = super().step(actions)
            for a in infos:
                if term[a] or trunc[a]:
                    infos[a] = {"episode": {"steps_seen": float(self.t), "label": "text is no metric"}}
            return obs, rew, term, trunc, infos


    SCENARIO = Scenario(
        "reporting", "a PettingZoo scenario that reports episode metrics",
        env=lambda cfg: Reporting(cfg.n_units, cfg.max_steps),
        graph=lambda cfg, agents: AgentGraph.groups(agents, layers=("high", "low")),
        layers=lambda cfg: [Layer("high", interval=2, goal_space=spaces.Discrete(2)), Layer("low")],
        config=ScriptedConfig,
        episode_info=lambda env: {"solved": float(env.t >= env.max_steps), "last_t": env.t})
''')


def zeros(d):
    return np.zeros(d.mask.shape, dtype=np.int64)


def finished(hier: HierarchyEnv, episodes: int) -> list[dict]:
    done: list[dict] = []
    while len(done) < episodes:
        done += hier.step(zeros).episodes
    return done


def test_the_episode_info_hook_is_called_on_the_copy_at_the_episodes_end():
    base, cfg = make_scenario(max_steps=5)
    seen = []

    def hook(env):
        seen.append((type(env), env.t, list(env.agents)))
        return {"t_at_end": env.t, "won": True}

    scenario = dataclasses.replace(base, episode_info=hook)
    hier = HierarchyEnv(scenario, cfg, n_envs=2, seed=0)
    eps = finished(hier, 4)
    assert [(e["t_at_end"], e["won"]) for e in eps] == [(5.0, 1.0)] * 4
    assert all(isinstance(e["won"], float) for e in eps)
    # the copy as env(cfg) returned it, read before its reset (all agents gone, its step count intact)
    assert seen[0] == (ScriptedEnv, 5, [])


def test_infos_episode_numbers_are_averaged_over_the_units_and_the_hook_wins(tmp_path):
    path = tmp_path / "reporting.py"
    path.write_text(USER_SCENARIO)
    scenario = load_scenario(str(path))
    hier = HierarchyEnv(scenario, scenario.make_config({"max_steps": "4"}), n_envs=1, seed=0)
    ep = finished(hier, 1)[0]
    assert ep["steps_seen"] == 4.0 and "label" not in ep
    assert ep["solved"] == 1.0 and ep["last_t"] == 4.0


def test_a_users_pettingzoo_scenario_reports_its_metric_in_eval(tmp_path):
    path = tmp_path / "reporting.py"
    path.write_text(USER_SCENARIO)
    run = make_run(tmp_path / "run", str(path), {"max_steps": "6"})
    res = evaluate(run, episodes=4, envs=2, seed=0)
    assert set(res["outcomes"]) == {"steps_seen", "solved", "last_t"}
    assert res["outcomes"]["solved"] == pytest.approx((1.0, 0.398, 1.0), abs=1e-3)    # a rate: 4 of 4
    assert res["outcomes"]["steps_seen"][0] == 6.0 and res["outcomes"]["last_t"][0] == 6.0


def test_a_metric_named_like_a_value_hdppo_records_is_refused():
    base, cfg = make_scenario(max_steps=3)
    hier = HierarchyEnv(dataclasses.replace(base, episode_info=lambda env: {"team_return": 1.0}), cfg, seed=0)
    with pytest.raises(ScenarioError, match="'team_return' has the name of a value hdppo records") as err:
        finished(hier, 1)
    assert "rename" in err.value.fix


def test_a_hook_returning_no_numbers_is_refused():
    base, cfg = make_scenario(max_steps=3)
    hier = HierarchyEnv(dataclasses.replace(base, episode_info=lambda env: {"who": "red"}), cfg, seed=0)
    with pytest.raises(ScenarioError, match="'who': 'red', which is not a number"):
        finished(hier, 1)


def test_a_native_scenario_with_the_hook_is_told_where_metrics_go():
    grid = load_scenario("grid")
    scenario: Scenario = dataclasses.replace(grid, episode_info=lambda env: {})
    with pytest.raises(ScenarioError, match="both batched_env and an episode_info") as err:
        HierarchyEnv(scenario, scenario.make_config(), seed=0)
    assert "BatchedEnv" in err.value.fix

