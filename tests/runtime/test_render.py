"""Rendering: scenario envs draw RGB frames; `hdppo render` writes a team's episode with squads and goals."""
from __future__ import annotations

import numpy as np
import pytest

from hdppo.runtime.render import team_overlay
from hdppo.sims.scene import Canvas, Overlay, Scene
from hdppo.team.scenario import load_scenario
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run


@pytest.mark.parametrize("name", ["skirmish", "grid", "warehouse"])
def test_native_envs_render_rgb_arrays(name):
    sc = load_scenario(name)
    env = type(sc.env(sc.make_config()))(sc.make_config(), render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.std() > 5                                   # something is drawn, not a blank canvas
    assert type(sc.env(sc.make_config()))(sc.make_config()).render() is None   # no mode: no frame


def test_batch_view_renders_its_scene_and_the_overlay():
    """A BatchParallelEnv given `scene=` draws it (and the team's overlay); without, it draws nothing."""
    from hdppo.sims import BatchParallelEnv
    sc = load_scenario("grid")
    cfg = sc.make_config()

    def units(env):
        return Scene((-0.5, 7.5, -0.5, 7.5), env.batch.positions()[0].astype(float), env.batch.alive[0].copy())
    env = BatchParallelEnv(sc.batched_env(cfg, 1, None), render_mode="rgb_array", scene=units)
    env.reset(seed=0)
    plain = env.render()
    assert plain.dtype == np.uint8 and plain.ndim == 3 and plain.std() > 5
    n = len(env.possible_agents)
    env.overlay = Overlay([list(range(n))], np.array([[7.0, 7.0]]), np.full((n, 2), 7.0))
    assert np.any(env.render() != plain)
    bare = BatchParallelEnv(sc.batched_env(cfg, 1, None), render_mode="rgb_array")
    bare.reset(seed=0)
    assert bare.render() is None
    assert BatchParallelEnv(sc.batched_env(cfg, 1, None), scene=units).render() is None   # no mode: no frame


@pytest.mark.parametrize("name,overrides", [("spread", {}), ("battle", {"map_size": "20"})])
def test_engine_envs_render_with_their_own_renderer(name, overrides):
    """spread (MPE2) and battle (MAgent2) take render_mode in their make_env and draw themselves."""
    import importlib
    sc = load_scenario(name)
    module = importlib.import_module(f"hdppo.scenarios.{name}")
    env = module.make_env(sc.make_config(overrides), render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    env.close()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3 and frame.std() > 5


def test_overlay_draws_squad_colours_and_goal_lines():
    scene = Scene((0, 10, 0, 10), np.array([[2.0, 2.0], [3.0, 2.0]]), np.array([True, True]))
    canvas = Canvas(160)
    plain = canvas.draw(scene)
    drawn = canvas.draw(scene, Overlay([[0, 1]], np.array([[8.0, 8.0]]), np.array([[8.0, 8.0], [8.0, 8.0]])))
    canvas.close()
    changed = np.any(plain != drawn, axis=2)
    ys, xs = np.nonzero(changed)
    assert changed.sum() > 100
    assert xs.max() > 0.7 * plain.shape[1] and ys.min() < 0.35 * plain.shape[0]   # the line reaches the far target


def test_team_overlay_places_goals(tmp_path):
    import hdppo
    run = make_run(tmp_path / "sk", "skirmish", {"max_steps": "20"})
    team = hdppo.load(run, deterministic=True)
    sc = team.scenario
    env = sc.env(team.cfg)
    obs, infos = env.reset(seed=0)
    team.reset()
    team.act(obs, infos)
    ov = team_overlay(team, sc, env)
    assert [len(g) for g in ov.groups] == [4, 4, 4]
    assert ov.squad_targets.shape == (3, 2) and ov.unit_targets.shape == (12, 2)
    g = team.goals()["mid"]["mid_0"]
    if g < team.cfg.n_points:                                # a point goal sits on that control point
        np.testing.assert_allclose(ov.squad_targets[0], env.batch.points[g])


@pytest.mark.parametrize("name,overrides", [("grid", {}), ("skirmish", {"max_steps": "30"})])
def test_render_command_writes_a_small_gif(tmp_path, capsys, name, overrides):
    import imageio.v2 as imageio
    run = make_run(tmp_path / name, name, overrides)
    out = tmp_path / "ep.gif"
    rc, stdout, err = cli(capsys, "render", run, "--out", out, "--episodes", "2", "--every", "3", "--pixels", "160")
    assert rc == 0, err
    frames = imageio.mimread(out)
    assert len(frames) == int(stdout.split("(")[1].split()[0]) >= 4
    assert frames[0].shape[:2] == (160, 160) and out.stat().st_size < 1_000_000


def test_render_refuses_bad_output(tmp_path, capsys):
    run = make_run(tmp_path / "g", "grid")
    rc, _, err = cli(capsys, "render", run, "--out", tmp_path / "ep.avi")
    assert rc == 2 and "neither .gif nor .mp4" in err


def test_render_says_it_read_the_runs_own_copy(tmp_path, capsys):
    """A run of a path scenario without scene(): after the user edits the file, render with
    --trust-run reads the run's frozen copy, and the error names that copy and --scenario PATH."""
    import shutil

    from tests.helpers import ROOT, TINY_CLI
    src = tmp_path / "work" / "myline.py"
    src.parent.mkdir()
    shutil.copyfile(ROOT / "examples" / "scenarios" / "line.py", src)
    run = tmp_path / "run"
    assert cli(capsys, "train", str(src), *TINY_CLI, "--steps", "100", "--out", str(run))[0] == 0
    src.write_text(src.read_text() + "\n# scene() added here after training\n")
    rc, _, err = cli(capsys, "render", str(run), "--out", str(tmp_path / "e.gif"), "--trust-run")
    assert rc == 2 and "Traceback" not in err, err
    assert f"as read from {run / 'scenario.py'}" in err and "the run's own copy" in err, err
    assert "--scenario PATH" in err, err
