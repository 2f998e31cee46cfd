"""`hdppo export`: ONNX / TorchScript actors and a manifest; the ONNX reference runtime acts like hdppo.load."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import hdppo
from hdppo.runtime.export import actor_module, export_team
from tests.helpers import ROOT
from tests.helpers.cli import cli
from tests.helpers.runtime import make_run, team_actions

CASES = {"skirmish": ({"max_steps": "40"}, {"roles": True}), "warehouse": ({"max_steps": "40"}, {}),
         "spread": ({"max_cycles": "30"}, {"centralized": True}),
         "battle": ({"map_size": "20", "max_cycles": "30"}, {}),
         "grid": ({}, {"roles": True}),
         str(ROOT / "examples" / "scenarios" / "adversary.py"): ({}, {})}     # Box goals, use_state, opponents


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("export")
    out = {}
    for k, (name, (overrides, keys)) in enumerate(CASES.items()):
        run = make_run(base / f"run{k}", name, overrides, **keys)
        export_team(run, base / f"exp{k}")
        out[Path(name).stem] = (run, base / f"exp{k}")
    return out


@pytest.mark.parametrize("name", [Path(n).stem for n in CASES])
def test_onnx_team_gives_the_same_actions_as_load(exported, name):
    from hdppo.runtime.onnx_team import OnnxTeam
    run, exp = exported[name]
    ours = team_actions(run, 40, seed=3, team=OnnxTeam(exp, deterministic=True))
    theirs = team_actions(run, 40, seed=3)
    assert len(ours) == len(theirs) >= 20
    for a, b in zip(ours, theirs):
        assert a.keys() == b.keys()
        for unit in a:
            np.testing.assert_allclose(a[unit], b[unit], atol=1e-5)


def test_manifest_describes_the_hierarchy(exported):
    run, exp = exported["skirmish"]
    m = json.loads((exp / "manifest.json").read_text())
    assert m["format"] == "hdppo-team-export" and m["scenario"] == "skirmish" and m["unit_action_mask"] is True
    high, mid, low = m["layers"]
    assert [layer["interval"] for layer in m["layers"]] == [16, 4, 1]
    assert high["choice"] == "per_child" and low["choice"] is None
    assert high["goal_space"] == {"type": "Discrete", "n": 6, "start": 0}
    assert low["action_space"]["type"] == "Discrete" and low["goal_space"] is None
    assert high["children"] == {"high_0": ["mid_0", "mid_1", "mid_2"]}
    assert mid["children"]["mid_0"] == ["melee_0", "melee_1", "ranged_2", "ranged_3"] == m["units"][:4]
    for layer in m["layers"]:
        assert sum(p["size"] for p in layer["observation"]) == layer["obs_dim"]
        assert layer["model"]["inputs"] == ["obs", "role"] and len(layer["model"]["roles"]) == len(layer["slots"])
        assert (exp / layer["model"]["file"]).is_file()
    assert [p["part"] for p in low["observation"]] == ["env_observation", "goal_features"]
    assert [p["part"] for p in mid["observation"]] == ["features", "goal_features", "child_features", "child_position"]
    adv = json.loads((exported["adversary"][1] / "manifest.json").read_text())
    assert adv["scenario"] == "scenario.py" and (exported["adversary"][1] / "scenario.py").is_file()
    assert "state" in [p["part"] for p in adv["layers"][0]["observation"]]
    assert adv["layers"][0]["goal_space"]["type"] == "Box"


def test_onnx_model_has_a_dynamic_batch_and_matches_the_actor(exported):
    import onnx
    import onnxruntime as ort
    run, exp = exported["grid"]
    model = onnx.load(str(exp / "low.onnx"))
    assert model.opset_import[0].version >= 17
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    team = hdppo.load(run, deterministic=True)
    policy = team._loaded["low"].module
    sess = ort.InferenceSession(str(exp / "low.onnx"))
    obs = np.random.default_rng(0).normal(size=(37, policy.obs_dim)).astype(np.float32)
    roles = np.arange(37) % policy.n_roles
    got = sess.run(None, {"obs": obs, "role": roles})[0]
    with torch.no_grad():
        want = policy.distribution(torch.from_numpy(obs), None, torch.from_numpy(roles)).logits
    want = want - want.logsumexp(-1, keepdim=True)
    np.testing.assert_allclose(got - np.log(np.exp(got).sum(-1, keepdims=True)), want.numpy(), atol=1e-5)


def test_onnx_runtime_needs_no_torch(exported):
    _, exp = exported["spread"]
    code = ("import sys; from hdppo.runtime.onnx_team import OnnxTeam\n"
            "from hdppo.team.scenario import load_scenario\n"
            "t = OnnxTeam(sys.argv[1]); sc = load_scenario('spread'); env = sc.env(t.cfg)\n"
            "obs, _ = env.reset(seed=0); t.reset(); n = 0\n"
            "while env.agents:\n"
            "    obs, *_ = env.step(t.act(obs, agents=env.agents)); n += 1\n"
            "print(n, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(exp)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["30", "False"]


def test_torchscript_export_and_cli(exported, tmp_path, capsys):
    run, _ = exported["grid"]
    rc, out, err = cli(capsys, "export", run, "--format", "torchscript", "--out", tmp_path / "ts")
    assert rc == 0, err
    m = json.loads((tmp_path / "ts" / "manifest.json").read_text())
    scripted = torch.jit.load(str(tmp_path / "ts" / m["layers"][-1]["model"]["file"]))
    policy = hdppo.load(run)._loaded["low"].module
    obs = torch.randn(5, policy.obs_dim)
    roles = torch.arange(5) % policy.n_roles
    torch.testing.assert_close(scripted(obs, roles), actor_module(policy)(obs, roles))
    rc, _, err = cli(capsys, "export", run, "--format", "tflite", "--out", tmp_path / "x")
    assert rc == 2 and "tflite" in err


def test_onnx_team_samples_legal_actions(exported):
    """Sampling mode: legal (masked) actions, reproducible under a seed, not always the greedy ones."""
    from hdppo.runtime.onnx_team import OnnxTeam
    run, exp = exported["skirmish"]
    greedy = team_actions(run, 30, seed=1, team=OnnxTeam(exp, deterministic=True))
    a = team_actions(run, 30, seed=1, team=OnnxTeam(exp, deterministic=False, seed=7))
    b = team_actions(run, 30, seed=1, team=OnnxTeam(exp, deterministic=False, seed=7))
    assert a == b and a != greedy
    from hdppo.scenarios.skirmish import SkirmishBatch
    team = OnnxTeam(exp, deterministic=False, seed=7)
    env = SkirmishBatch(team.cfg, 1, 0)
    env.reset(seed=0)
    team.reset()
    for _ in range(30):
        obs = {u: env.obs[0, i] for i, u in enumerate(env.units)}
        acts = team.act(obs, {u: {"action_mask": env.action_mask[0, i]} for i, u in enumerate(env.units)},
                        agents=[u for i, u in enumerate(env.units) if env.alive[0, i]])
        assert all(env.action_mask[0, env.units.index(u), x] for u, x in acts.items())   # masked actions never drawn
        arr = np.zeros((1, len(env.units)), np.int64)
        for u, x in acts.items():
            arr[0, env.units.index(u)] = x
        if env.step(arr).done.any():
            break
