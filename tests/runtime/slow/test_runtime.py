"""hdppo.load / Team: a trained team acting in the caller's own loop, equal to the training path."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import hdppo
from hdppo.errors import ConfigError, ScenarioError
from hdppo.team.scenario import load_scenario
from tests.helpers import ROOT
from tests.helpers.runtime import make_run, team_actions, worker_actions

SMALL = {"skirmish": {"max_steps": "60"}, "warehouse": {"max_steps": "60"}, "spread": {"max_cycles": "40"},
         "battle": {"map_size": "20", "max_cycles": "40"}, "grid": {}}
POLICY_KEYS = {"skirmish": {}, "warehouse": {"roles": True}, "spread": {"centralized": True},
               "battle": {}, "grid": {"roles": True, "centralized": True}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {name: make_run(base / name, name, SMALL[name], **POLICY_KEYS[name]) for name in SMALL}


def test_import_is_light_and_exports_load():
    code = "import sys, hdppo; assert 'torch' not in sys.modules; print(sorted(set(dir(hdppo)) & {'load', 'Team'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "['Team', 'load']"
    assert hdppo.load is hdppo.runtime.load and hdppo.Team is hdppo.runtime.Team


@pytest.mark.parametrize("scenario", list(SMALL))
def test_same_actions_as_the_training_worker(runs, scenario):
    """Deterministic: the Worker's HierarchyEnv and team.act over the scenario's env agree step by step."""
    w = worker_actions(runs[scenario], 60, seed=5)
    t = team_actions(runs[scenario], 60, seed=5)
    assert len(w) >= 30 and w == t


@pytest.mark.parametrize("scenario", ["skirmish", "grid"])
def test_same_sampled_actions_as_the_training_worker(runs, scenario):
    """Stochastic: the team keeps its own torch stream, seeded like a worker's, so samples agree too."""
    w = worker_actions(runs[scenario], 40, seed=2, deterministic=False)
    t = team_actions(runs[scenario], 40, seed=2, deterministic=False)
    assert w == t
    assert w != worker_actions(runs[scenario], 40, seed=2, deterministic=True)


def _plain_episode(run: Path, scenario: str, env, sim=None, opponent=None,
                   max_steps: int = 500) -> tuple[int, hdppo.Team]:
    """One episode of the PettingZoo env in a plain loop with team.act; returns its length."""
    team = hdppo.load(run, deterministic=True)
    obs, infos = env.reset(seed=1)
    team.reset()
    units = set(team.units)
    steps = 0
    while env.agents and steps < max_steps:
        acts = team.act(obs, infos, agents=env.agents, sim=sim)
        assert set(acts) == {a for a in env.agents if a in units}
        for a, x in acts.items():
            assert env.action_space(a).contains(np.asarray(x, dtype=env.action_space(a).dtype)
                                                if isinstance(env.action_space(a), gym.spaces.Box) else x)
        if opponent is not None:
            acts.update(opponent({a: o for a, o in obs.items() if a not in units and a in env.agents}))
        obs, _, _, _, infos = env.step(acts)
        steps += 1
    return steps, team


@pytest.mark.parametrize("scenario", list(SMALL))
def test_plain_loop_over_the_pettingzoo_env(runs, scenario):
    sc = load_scenario(scenario)
    cfg = sc.make_config(SMALL[scenario])
    env = sc.env(cfg)
    sim = getattr(env, "batch", None) if scenario == "warehouse" else None   # its grounding reads the simulator
    opponent = None
    if scenario == "battle":
        from hdppo.scenarios.battle import blue_controller
        opponent = blue_controller(cfg, env, 0)
    steps, team = _plain_episode(runs[scenario], scenario, env, sim, opponent)
    assert steps >= 10 and not env.agents if scenario != "spread" else steps == 40
    assert team.t == steps or not env.agents
    env.close()


def test_user_scenario_file(tmp_path):
    """A scenario given by path (MPE2 simple_line through PettingZooBatch), run in a plain loop."""
    path = str(ROOT / "examples" / "scenarios" / "line.py")
    run = make_run(tmp_path / "line", path)
    sc = load_scenario(path)
    env = sc.env(sc.make_config())
    steps, team = _plain_episode(run, "line", env)
    assert steps == 25
    assert [layer.name for layer in team.layers] == ["high", "low"]
    assert worker_actions(run, 25, seed=4) == team_actions(run, 25, seed=4)


def test_layers_goals_and_members(runs):
    team = hdppo.load(runs["skirmish"], deterministic=True)
    names = [(d.name, d.interval, d.acting, d.choice) for d in team.layers]
    assert names == [("high", 16, "checkpoint", "per_child"), ("mid", 4, "checkpoint", "per_child"),
                     ("low", 1, "checkpoint", None)]
    assert team.layers[0].goal_space == gym.spaces.Discrete(6) and team.layers[-1].goal_space is None
    assert len(team.layers[1].nodes) == 3 and team.layers[-1].obs_dim == team.layers[-1].obs_dim
    sc = load_scenario("skirmish")
    env = sc.env(sc.make_config(SMALL["skirmish"]))
    obs, infos = env.reset(seed=0)
    team.reset()
    team.act(obs, infos)
    goals = team.goals()
    assert set(goals) == {"mid", "low"}
    assert set(goals["low"]) == set(team.units) and all(0 <= g < 6 + 12 for g in goals["low"].values())
    assert team.members() == {f"mid_{k}": team.units[4 * k:4 * k + 4] for k in range(3)}


def test_deaths_and_episode_end(runs):
    """Units missing from the observations are dead: no actions, no new goals; none left ends the episode."""
    team = hdppo.load(runs["grid"], deterministic=True)
    sc = load_scenario("grid")
    env = sc.env(sc.make_config())
    obs, infos = env.reset(seed=0)
    team.reset()
    team.act(obs)
    dead = team.units[0]
    before = team.goals()["low"][dead]
    for _ in range(12):                   # past mid's interval 4 and high's 8: new goals for the living
        obs, *_ = env.step({a: 0 for a in env.agents})
        acts = team.act({a: o for a, o in obs.items() if a != dead})
        assert dead not in acts and set(acts) == set(team.units) - {dead}
    assert team.goals()["low"][dead] == before
    assert team.act({}) == {}
    with pytest.raises(ConfigError, match="episode is over"):
        team.act(obs)
    team.reset()
    assert set(team.act(env.reset(seed=1)[0])) == set(team.units)


def test_bad_input_is_one_clear_error(runs, tmp_path):
    team = hdppo.load(runs["grid"])
    with pytest.raises(ConfigError, match="not a unit of this team"):
        team.act({"nobody": np.zeros(3)})
    with pytest.raises(ConfigError, match=r"takes|take"):
        team.act({team.units[0]: np.zeros(999)})
    team = hdppo.load(runs["warehouse"])
    sc = load_scenario("warehouse")
    env = sc.env(sc.make_config(SMALL["warehouse"]))
    obs, _ = env.reset(seed=0)
    team.reset()
    with pytest.raises(ScenarioError, match="sim="):
        team.act(obs)                                   # its grounding reads the simulator: sim= is needed


def test_untrained_layer_refused_unless_allowed(tmp_path):
    run = make_run(tmp_path / "g", "grid", layers=["low"])
    cfg = (run / "config.json").read_text().replace('"layers": ["low"]', '"layers": ["high", "mid", "low"]')
    (run / "config.json").write_text(cfg)
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        hdppo.load(run)
    team = hdppo.load(run, allow_untrained=True)
    assert [d.acting for d in team.layers] == ["uniform", "uniform", "checkpoint"]


def test_overrides_change_the_scenario(runs):
    team = hdppo.load(runs["skirmish"], overrides={"difficulty": 0.9})
    assert team.cfg.difficulty == 0.9 and team.cfg.max_steps == 60


@pytest.mark.parametrize("script,scenario", [("play_skirmish.py", "skirmish"), ("remote_sim.py", "spread")])
def test_deploy_examples_run(runs, script, scenario):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "deploy" / script), str(runs[scenario]),
                          "--episodes", "2"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("episode 1:") >= 1 and "Traceback" not in out.stderr


def test_trained_run_plays_from_python_c(tmp_path):
    """A real (tiny) `hdppo train` run, then a full episode from `python -c` in a plain loop."""
    run = tmp_path / "grid"
    subprocess.run([sys.executable, "-m", "hdppo.cli", "train", "grid", "--steps", "1500", "--workers", "1",
                    "--backend", "inline", "--no-progress", "--out", str(run)], check=True, cwd=ROOT,
                   capture_output=True, timeout=300)
    code = ("import hdppo, sys; from hdppo.scenarios.grid import GridParallelEnv\n"
            "t = hdppo.load(sys.argv[1], deterministic=True); env = GridParallelEnv(t.cfg)\n"
            "obs, _ = env.reset(seed=0); t.reset(); n = 0\n"
            "while env.agents:\n"
            "    obs, *_ = env.step(t.act(obs, agents=env.agents)); n += 1\n"
            "print(n, [l.acting for l in t.layers])")
    out = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    steps, acting = out.stdout.split(" ", 1)
    assert 1 <= int(steps) <= 50 and acting.strip() == "['checkpoint', 'checkpoint', 'checkpoint']"


def test_state_is_needed_each_step_for_use_state_layers(tmp_path):
    """adversary's commander reads the env's global state: without state= the team says so."""
    path = str(ROOT / "examples" / "scenarios" / "adversary.py")
    run = make_run(tmp_path / "adv", path)
    team = hdppo.load(run, deterministic=True)
    sc = load_scenario(path)
    env = sc.env(sc.make_config())
    obs, _ = env.reset(seed=0)
    team.reset()
    with pytest.raises(ScenarioError, match=re.escape("pass state=env.state()")):
        team.act(obs, agents=env.agents)
    team.reset()
    acts = team.act(obs, agents=env.agents, state=env.state())
    assert set(acts) == set(team.units)


SPATIAL_GRID = '''
import dataclasses
from hdppo.team.graph import AgentGraph
from hdppo.scenarios.grid import SCENARIO as GRID
from tests.helpers import ROOT

SCENARIO = dataclasses.replace(GRID, name="grid_spatial", graph=lambda cfg, agents: AgentGraph.team(
    list(agents), cfg.layers, cfg.squad_size, spatial=True))
'''


def test_spatial_grouping_from_given_positions(tmp_path):
    """Squads regrouped by position at reset: from positions= (or sim=), the same groups and actions as training."""
    path = tmp_path / "grid_spatial.py"
    path.write_text(SPATIAL_GRID)
    run = make_run(tmp_path / "run", str(path), {"n_units": "6", "squad_size": "3", "size": "9"})
    assert worker_actions(run, 30, seed=2) == team_actions(run, 30, seed=2)      # positions via sim=
    team = hdppo.load(run, deterministic=True)
    sc = load_scenario(str(path))
    env = sc.env(team.cfg)
    obs, _ = env.reset(seed=0)
    team.reset()
    with pytest.raises(ScenarioError, match="positions="):
        team.act(obs)
    team.reset()
    xy = env.batch.positions()[0]
    team.act(obs, positions={u: xy[i] for i, u in enumerate(team.units)})
    from hdppo.team.graph import spatial_groups
    groups = spatial_groups(xy, 3)
    assert sorted(map(sorted, team.members().values())) == sorted(
        sorted(u for i, u in enumerate(team.units) if groups[i] == g) for g in set(groups))
