"""What the after-step hooks see: `prev_features` / `prev_goal_features` are the layer's arrays from
before the env step (docs/writing-a-scenario.md), in `intrinsic` and in `goal_success`.

Both were None on every step: LayerContext stored the constructor's None defaults as attributes,
which hid the lazy values the hierarchy set after building the context.
"""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from hdppo.team.graph import AgentGraph
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import Layer, LayerContext, Scenario
from tests.helpers.scripted_env import ScriptedConfig, ScriptedEnv


def recording_scenario(seen: dict[str, list]) -> Scenario:
    def low_intrinsic(ctx: LayerContext) -> np.ndarray:
        seen["low"].append((ctx.prev_features, ctx.features, ctx.prev_goal_features))
        return np.zeros(ctx.alive.shape)

    def low_success(ctx: LayerContext) -> np.ndarray:
        seen["success"].append((ctx.prev_features, ctx.features, ctx.prev_goal_features))
        return np.zeros(ctx.alive.shape, bool)

    def layers(cfg):
        return [Layer("high", interval=4, goal_space=spaces.Discrete(2)),
                Layer("mid", interval=2, goal_space=spaces.Discrete(3), goal_success=low_success),
                Layer("low", interval=1, intrinsic=low_intrinsic, w_int=1.0)]

    return Scenario("recording", "hooks that record their context", env=lambda cfg: ScriptedEnv(4, 6),
                    graph=lambda cfg, agents: AgentGraph.groups(agents, [2]), layers=layers, config=ScriptedConfig)


def test_after_step_hooks_see_the_state_before_the_step() -> None:
    seen: dict[str, list] = {"low": [], "success": []}
    scenario = recording_scenario(seen)
    hier = HierarchyEnv(scenario, scenario.make_config(), n_envs=2, seed=0)
    hier.reset(seed=0)
    before = []
    for _ in range(3):
        before.append(hier.features(2).copy())
        hier.step(lambda d: np.zeros(d.mask.shape, dtype=np.int64))
    for hook in ("low", "success"):
        assert len(seen[hook]) == 3, hook
        for (prev, now, prev_goal), want in zip(seen[hook], before):
            assert prev is not None and prev_goal is not None, hook
            np.testing.assert_array_equal(prev, want)
            assert prev_goal.shape[:2] == now.shape[:2]
    # the units' observation holds the env step (ScriptedEnv): before and after differ
    assert not np.array_equal(seen["low"][1][0], seen["low"][1][1])


def test_a_context_built_by_hand_keeps_what_it_was_given() -> None:
    f = np.ones((1, 2, 3))
    ctx = LayerContext(f, np.ones((1, 2), bool), prev_features=f * 2)
    np.testing.assert_array_equal(ctx.prev_features, f * 2)
    assert LayerContext(f, np.ones((1, 2), bool)).prev_goal_features is None


HOOK_FAILS = '''
import numpy as np
from gymnasium import spaces

from hdppo import AgentGraph, Layer, Scenario
from tests.helpers.scripted_env import ScriptedConfig, ScriptedEnv


def intrinsic(ctx):
    return ctx.prev_features[..., 0] * None      # TypeError in the user's own hook


SCENARIO = Scenario("hook_fails", "a hook that raises", env=lambda cfg: ScriptedEnv(4, 6),
                    graph=lambda cfg, agents: AgentGraph.groups(agents, [2]),
                    layers=lambda cfg: [Layer("high", interval=4, goal_space=spaces.Discrete(2)),
                                        Layer("mid", interval=2, goal_space=spaces.Discrete(3)),
                                        Layer("low", intrinsic=intrinsic, w_int=1.0)],
                    config=ScriptedConfig)
'''


def test_check_names_the_hooks_file_and_line_in_a_project_folder_named_hdppo(tmp_path) -> None:
    """The frames of hdppo itself are dropped by location: a project under a folder called hdppo
    (where the filter dropped every frame by name) keeps its file and line."""
    from hdppo.team.check import run_check
    path = tmp_path / "hdppo" / "game" / "scenarios" / "hook_fails.py"
    path.parent.mkdir(parents=True)
    path.write_text(HOOK_FAILS)
    report = run_check(str(path), episodes=1, n_envs=1)
    failed = [line for line in report.lines if not line.ok]
    assert failed and "TypeError" in failed[0].detail
    assert f"at line 10 of {path}" in failed[0].detail, failed[0].detail
    assert "Traceback" in failed[0].trace and "hook_fails.py" in failed[0].trace


def test_check_debug_prints_the_hooks_traceback(tmp_path, capsys) -> None:
    from hdppo.cli import main
    path = tmp_path / "hook_fails.py"
    path.write_text(HOOK_FAILS)
    check = ["check", str(path), "--episodes", "1"]
    for argv in ([*check, "--debug"], ["--debug", *check]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "Traceback" in err and "hook_fails.py" in err, argv


def test_an_observe_hook_reading_features_is_told_to_build_them_from_its_children() -> None:
    """`observe` computes its layer's features, so it has none to read: it got None and failed later,
    far from the cause (`'NoneType' object is not subscriptable`); now the read names the fields to use."""
    def observe(ctx: LayerContext) -> np.ndarray:
        return ctx.features[..., :1]

    def layers(cfg):
        return [Layer("high", interval=2, goal_space=spaces.Discrete(2), observe=observe,
                      observe_space=spaces.Box(-np.inf, np.inf, (1,), np.float32)),
                Layer("low", interval=1)]

    scenario = Scenario("reads", "an observe hook that reads features", env=lambda cfg: ScriptedEnv(4, 6),
                        graph=lambda cfg, agents: AgentGraph.team(agents, 2, len(agents)), layers=layers,
                        config=ScriptedConfig)
    hier = HierarchyEnv(scenario, scenario.make_config(), n_envs=2, seed=0)
    with pytest.raises(AttributeError, match=r"observe hook.*ctx\.child_features and ctx\.child_alive"):
        hier.reset(seed=0)
        hier.step(lambda d: np.zeros(d.mask.shape, dtype=np.int64))
    ctx = LayerContext(np.ones((1, 2, 3)), np.ones((1, 2), bool))
    assert ctx.features.shape == (1, 2, 3)                           # every other hook reads them as before
