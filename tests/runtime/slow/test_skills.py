"""A trained skill library on grid follows orders: its units walk toward the target they are ordered to,
through hdppo.load and through its ONNX export alike."""
from __future__ import annotations

import numpy as np
import pytest

import hdppo
from hdppo.runtime.export import export_team
from hdppo.scenarios.grid import GridBatch, GridConfig
from tests.helpers.cli import cli


@pytest.fixture(scope="module")
def skills(tmp_path_factory):
    out = tmp_path_factory.mktemp("skills") / "run"
    from hdppo.cli import main
    assert main(["train", "grid", "--skills", "--steps", "16000", "--backend", "inline", "--workers", "1",
                 "--seed", "0", "--no-progress", "--out", str(out)]) == 0
    return out


def walk(team, episode: int, target: int, order: int, steps: int = 6) -> list[bool]:
    """Per step of one grid episode whose unit_0 is ordered to `order`: did it get nearer `target`?"""
    env = GridBatch(GridConfig(), 1, 1000 + episode)
    team.reset()
    out = []
    for _ in range(steps):
        if not env.alive[0, 0] or env.claimed[0, target]:
            break
        before = abs(env.x[0, 0] - env.tx[0, target]) + abs(env.y[0, 0] - env.ty[0, target])
        acts = team.act({u: env.obs[0, i] for i, u in enumerate(env.units) if env.alive[0, i]},
                        goals={"unit_0": order})
        env.step(np.array([[acts.get(u, 0) for u in env.units]]))
        out.append(abs(env.x[0, 0] - env.tx[0, target]) + abs(env.y[0, 0] - env.ty[0, target]) < before)
    return out


def test_ordered_units_move_toward_their_target_more_than_under_another_order(skills):
    team = hdppo.load(skills, deterministic=True)
    rng = np.random.default_rng(0)
    ordered, other = [], []
    for episode in range(20):
        target, elsewhere = (int(g) for g in rng.choice(4, 2, replace=False))
        ordered += walk(team, episode, target, target)
        other += walk(team, episode, target, elsewhere)
    assert np.mean(ordered) > 0.8 and np.mean(ordered) > np.mean(other) + 0.25


def test_the_exported_skill_library_takes_the_same_orders(skills, tmp_path, capsys):
    from hdppo.runtime.onnx_team import OnnxTeam
    rc, _, err = cli(capsys, "export", skills, "--out", tmp_path / "exp")
    assert rc == 0, err
    onnx, torch_team = OnnxTeam(tmp_path / "exp", deterministic=True), hdppo.load(skills, deterministic=True, seed=0)
    assert [layer.acting for layer in onnx.layers] == ["uniform", "uniform", "checkpoint"]
    for episode in range(3):
        for team in (onnx, torch_team):
            team.reset(seed=episode)                  # the same uniform commanders' streams
        env = GridBatch(GridConfig(), 1, episode)
        for t in range(10):
            obs = {u: env.obs[0, i] for i, u in enumerate(env.units) if env.alive[0, i]}
            orders = {"unit_0": t % 4, "mid_1": 2}
            a, b = onnx.act(obs, goals=orders), torch_team.act(obs, goals=orders)
            assert a == b and onnx.goals() == torch_team.goals()
            if env.step(np.array([[a.get(u, 0) for u in env.units]])).done.any():
                break


def test_export_of_a_skill_run_lists_its_uniform_commanders(skills, tmp_path):
    import json
    manifest = json.loads(export_team(skills, tmp_path / "exp").read_text())
    assert [layer["acting"] for layer in manifest["layers"]] == ["uniform", "uniform", "checkpoint"]
    assert [bool(layer.get("model")) for layer in manifest["layers"]] == [False, False, True]
