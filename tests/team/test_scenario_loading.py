"""Loading user scenario files: broken files fail with one clear ScenarioError, valid ones run.

`tests/scenarios_broken/*.py` each hold one realistic mistake; `tests/scenarios_ok/*.py` are user
scenarios written only from the public API around MPE2 envs other than simple_spread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hdppo.team.scenario as scenario_mod
from hdppo.errors import ScenarioError
from hdppo.team.controllers import uniform_policy
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Scenario, load_scenario
from tests.helpers import TESTS

HERE = TESTS
BROKEN = HERE / "scenarios_broken"
OK = HERE / "scenarios_ok"

BUG_GRAPH_CHECKED_LATE = (
    "hdppo bug: make_batched_env builds the PettingZooBatch from graph.units before the graph is validated "
    "against the env's agents, and drives any agent missing from the graph with random_opponent"
)

# file stem -> (where it fails: 'load' | 'layers' | 'env', key phrases of the problem)
BROKEN_CASES = {
    "import_error": ("load", ["failed to import", "No module named 'mpe3'", "line 2"]),
    "syntax_error": ("load", ["failed to import", "SyntaxError", "line 7"]),
    "no_scenario": ("load", ["defines no SCENARIO"]),
    "bad_goal_space": ("layers", ["layer 'high'", "goal_space (0, 5)", "not a Gymnasium space"]),
    "unknown_layer": ("env", ["'commander'", "differ from the scenario's layers"]),
    "leaves_mismatch": ("env", ["'unit_0'", "not an agent of the env"]),
    "missing_agent": ("env", ["'agent_2'", "neither in the graph nor"]),
    "bad_interval": ("layers", ["layer 'high'", "interval 6", "not a multiple", "'mid'"]),
}
XFAIL: set[str] = set()


def _cases():
    for stem, (stage, phrases) in BROKEN_CASES.items():
        marks = [pytest.mark.xfail(strict=True, reason=BUG_GRAPH_CHECKED_LATE)] if stem in XFAIL else []
        yield pytest.param(stem, stage, phrases, id=stem, marks=marks)


def test_every_broken_file_has_a_case() -> None:
    assert sorted(p.stem for p in BROKEN.glob("*.py")) == sorted(BROKEN_CASES)
    assert not (BROKEN / "__init__.py").exists() and not (OK / "__init__.py").exists()


@pytest.mark.parametrize("stem,stage,phrases", list(_cases()))
def test_broken_scenario_raises_scenario_error(stem: str, stage: str, phrases: list[str]) -> None:
    path = BROKEN / f"{stem}.py"
    with pytest.raises(ScenarioError) as info:
        scenario = load_scenario(str(path))
        assert stage != "load", "the file loaded but should not have"
        assert isinstance(scenario, Scenario)
        cfg = scenario.make_config()
        if stage == "layers":
            scenario.build_layers(cfg)
            pytest.fail("build_layers accepted the layers")
        env = HierarchyEnv(scenario, cfg, n_envs=1, seed=0)
        env.close()
    err = info.value
    msg = str(err)
    assert str(path) in msg or f"scenario '{stem}'" in msg, msg
    for phrase in phrases:
        assert phrase in msg, f"{phrase!r} not in {msg!r}"
    assert "\n  fix: " in msg and err.fix


@pytest.mark.parametrize("stem", ["bad_goal_space", "bad_interval"])
def test_layer_errors_also_stop_hierarchy_env(stem: str) -> None:
    scenario = load_scenario(str(BROKEN / f"{stem}.py"))
    with pytest.raises(ScenarioError, match=f"scenario '{stem}'"):
        HierarchyEnv(scenario, None, n_envs=1, seed=0)


def test_load_errors_keep_the_cause_for_debug() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(BROKEN / "import_error.py"))
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_missing_scenario_file() -> None:
    path = BROKEN / "does_not_exist.py"
    with pytest.raises(ScenarioError, match="does not exist") as info:
        load_scenario(str(path))
    assert str(path) in str(info.value) and info.value.fix


# ---- loading by name --------------------------------------------------------------------------
def test_unknown_name_lists_known_scenarios() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario("nonexistent")
    err = info.value
    assert "'nonexistent'" in err.problem
    assert "use one of:" in err.fix and "hdppo scenarios" in err.fix
    for name, _ in scenario_mod.scenario_names():
        assert name in err.fix


def test_load_by_name_from_a_scenario_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "hdppo_test_scenarios_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reference_pair.py").write_text((OK / "reference_pair.py").read_text())
    (pkg / "tag_pursuit.py").write_text((OK / "tag_pursuit.py").read_text())
    (pkg / "_helpers.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(scenario_mod, "SCENARIO_PACKAGE", pkg.name)
    monkeypatch.chdir(tmp_path)           # no ./scenarios folder of a project here

    with pytest.raises(ScenarioError) as info:
        load_scenario("tag_pursiut")
    assert "reference_pair, tag_pursuit" in info.value.fix and "_helpers" not in info.value.fix

    scenario = load_scenario("tag_pursuit")
    assert scenario.name == "tag_pursuit"
    assert Path(scenario.source).resolve() == (pkg / "tag_pursuit.py").resolve()
    assert [s.name for s in scenario_mod.list_scenarios()] == ["reference_pair", "tag_pursuit"]


# ---- valid user scenarios ------------------------------------------------------------------------
def _run(scenario: Scenario, cfg, steps: int = 50, n_envs: int = 2):
    env = HierarchyEnv(scenario, cfg, n_envs=n_envs, seed=0)
    pols = [uniform_policy(info, seed=i) for i, info in enumerate(env.info)]
    results = [env.step(lambda d: pols[d.layer](d)) for _ in range(steps)]
    return env, results


def test_ok_files_load() -> None:
    paths = sorted(OK.glob("*.py"))
    assert [p.stem for p in paths] == ["reference_pair", "tag_pursuit"]
    for p in paths:
        scenario = load_scenario(str(p))
        assert isinstance(scenario, Scenario) and scenario.name == p.stem
        assert Path(scenario.source).resolve() == p.resolve()


def test_tag_pursuit_runs_with_scripted_prey() -> None:
    scenario = load_scenario(str(OK / "tag_pursuit.py"))
    env, results = _run(scenario, scenario.make_config())
    try:
        assert [info.name for info in env.info] == ["high", "mid", "low"]
        assert env.graph.units == [f"adversary_{i}" for i in range(4)]
        assert env.env.opponents == ["agent_0", "agent_1"]
        assert [info.n_slots for info in env.info] == [2, 4, 4]      # per_child: 1x2 squads, 2x2 units
        assert env.info[-1].obs_dim == 22 + 2                          # adversary obs + vector to its prey
        closed = [sum(int(r.layers[i].closed.sum()) for r in results) for i in range(3)]
        # 25-step episodes, 2 copies, 2 episodes each: high decides at t=0,8,16,24, mid at 0,4,..,24
        assert closed == [2 * 2 * 4 * 2, 2 * 2 * 7 * 4, 2 * 50 * 4]
        episodes = [ep for r in results for ep in r.episodes]
        assert len(episodes) == 4 and all(ep["length"] == 25 for ep in episodes)
        for r in results:
            for layer in r.layers:
                assert np.isfinite(layer.reward).all()
    finally:
        env.close()


def test_tag_pursuit_intrinsic_weight_is_overridable() -> None:
    scenario = load_scenario(str(OK / "tag_pursuit.py"))
    env0, plain = _run(scenario, scenario.make_config({"w_int.low": "0"}), steps=10, n_envs=1)
    env1, shaped = _run(scenario, scenario.make_config({"w_int.low": "0.5"}), steps=10, n_envs=1)
    env0.close(), env1.close()
    for a, b in zip(plain, shaped):
        np.testing.assert_array_equal(a.env_rewards, b.env_rewards)   # same seed, same trajectory
        np.testing.assert_allclose(a.layers[-1].reward, a.env_rewards, rtol=1e-6)
        assert (b.layers[-1].reward < a.layers[-1].reward).all()      # minus 0.5 x distance to prey


def test_tag_pursuit_config_errors_name_the_scenario() -> None:
    scenario = load_scenario(str(OK / "tag_pursuit.py"))
    with pytest.raises(ScenarioError) as info:
        scenario.make_config({"num_goood": "2"})
    assert "scenario 'tag_pursuit'" in str(info.value) and "num_good" in info.value.fix
    with pytest.raises(ScenarioError, match="not a multiple"):
        scenario.build_layers(scenario.make_config({"interval.high": "6"}))
    with pytest.raises(ScenarioError, match="unknown layer 'commander'"):
        scenario.build_layers(scenario.make_config({"w_int.commander": "1"}))


def test_reference_pair_two_layers_broadcast() -> None:
    scenario = load_scenario(str(OK / "reference_pair.py"))
    env, results = _run(scenario, scenario.make_config())
    try:
        assert [info.name for info in env.info] == ["high", "low"]
        assert [info.choice for info in env.info] == ["broadcast", None]
        assert [info.n_slots for info in env.info] == [1, 2]
        assert env.info[-1].obs_dim == 21 + 3                          # env obs + one-hot landmark
        assert env.env.opponents == []
        closed = [sum(int(r.layers[i].closed.sum()) for r in results) for i in range(2)]
        assert closed == [2 * 5 * 2, 2 * 50 * 2]                       # high every 5 steps
        # a broadcast goal is the same for both units of a copy
        goals = env.goals[1]
        assert (goals == goals[:, :1]).all()
    finally:
        env.close()
