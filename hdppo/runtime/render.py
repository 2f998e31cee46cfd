"""Drawing a team's episode: a scenario's scene (units, opponents, landmarks) plus the team's squads
and goals, as RGB frames, and `hdppo render` writing them to a GIF or MP4 with imageio.

A scenario that renders gives `Scenario.scene(env) -> Scene` (env: its PettingZoo env; the scene
types live on the environment side, in hdppo.sims.scene) and `Scenario.goal_xy(env, cfg, layer,
goals) -> [N, 2]` (where the goals held by a layer's nodes lie, NaN where a goal has no place).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hdppo.errors import ConfigError
from hdppo.sims.scene import Canvas, Overlay


def team_overlay(team: Any, scenario: Any, env: Any) -> Overlay:
    """Squads, their goals and the units' goals of a loaded team, placed by the scenario's goal_xy."""
    index = {u: i for i, u in enumerate(team.units)}
    members = team.members()
    groups = [[index[u] for u in units] for units in members.values()]
    goals = team.goals()
    names = [d.name for d in team.layers]
    overlay = Overlay(groups)
    if scenario.goal_xy is None or not goals:
        return overlay
    unit_layer = names[-1]
    if unit_layer in goals:
        g = np.array([goals[unit_layer][u] for u in team.units])
        overlay.unit_targets = np.asarray(scenario.goal_xy(env, team.cfg, unit_layer, g), float)
    if len(names) >= 3 and names[-2] in goals:
        squads = list(members)
        g = np.array([goals[names[-2]][s] for s in squads])
        overlay.squad_targets = np.asarray(scenario.goal_xy(env, team.cfg, names[-2], g), float)
    return overlay


def _no_scene(run: Path, scenario: Any) -> ConfigError:
    """The scenario gives no scene: say which file was read, since a run may read its own frozen copy."""
    source = Path(scenario.source) if scenario.source else None
    where = f", as read from {source}" if source else ""
    fix = "add scene= and goal_xy= to its Scenario (docs/writing-a-scenario.md, \"Rendering\")"
    if source is not None and source.resolve().parent == run.resolve():
        where += " (the run's own copy, made when it was trained: later edits to your file are not in it)"
        fix += "; to render with your edited file, pass --scenario PATH (scenario=PATH in Python)"
    return ConfigError(f"scenario {scenario.name!r} does not render: it gives no scene(env){where}", fix)


def render_episodes(run: str | Path, out: str | Path, episodes: int = 1, overrides: Mapping[str, str] | None = None,
                    max_steps: int = 1000, every: int = 1, fps: int = 10, pixels: int = 320,
                    deterministic: bool = True, seed: int = 0, *, trust_run: bool | None = None,
                    scenario_path: str | None = None) -> tuple[Path, int]:
    """Play `episodes` with the run's team (hdppo.load, which `trust_run` and `scenario_path` go to)
    and write the frames to `out` (.gif or .mp4)."""
    import imageio.v2 as imageio

    from hdppo.runtime import load
    out = Path(out)
    if out.suffix.lower() not in (".gif", ".mp4"):
        raise ConfigError(f"--out {out} is neither .gif nor .mp4", "name the file episode.gif or episode.mp4")
    if episodes < 1 or every < 1:
        raise ConfigError("--episodes and --every must be at least 1", "pass --episodes 1 --every 1")
    team = load(run, deterministic=deterministic, overrides=overrides, trust_run=trust_run, scenario=scenario_path)
    scenario = team.scenario
    if scenario.scene is None:
        raise _no_scene(Path(run), scenario)
    env = scenario.env(team.cfg)
    sim = getattr(env, "batch", None)
    opponent = None
    if scenario.opponents is not None:
        opponent = scenario.opponents.controller(team.cfg, env)
    canvas = Canvas(pixels)
    frames = []
    try:
        for episode in range(episodes):
            obs, infos = env.reset(seed=seed + episode)
            team.reset()
            steps = 0
            while env.agents and steps < max_steps:
                acts = team.act(obs, infos, agents=env.agents, sim=sim)
                if steps % every == 0:
                    scene = scenario.scene(env)
                    scene.title = f"{scenario.name}  episode {episode}  step {steps}"
                    frames.append(canvas.draw(scene, team_overlay(team, scenario, env)))
                if opponent is not None:
                    units = set(team.units)
                    acts.update(opponent({a: o for a, o in obs.items() if a not in units and a in env.agents}))
                obs, _, _, _, infos = env.step(acts)
                steps += 1
    finally:
        canvas.close()
        env.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    # imageio annotates the frames as list[ArrayLike], which a list[ndarray] does not match (list is invariant)
    if out.suffix.lower() == ".gif":
        imageio.mimsave(out, frames, duration=1000 / fps, loop=0)  # type: ignore[arg-type]
    else:
        imageio.mimsave(out, frames, fps=fps)  # type: ignore[arg-type]
    return out, len(frames)
