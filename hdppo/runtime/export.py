"""`hdppo export`: each checkpointed layer's actor as ONNX (or TorchScript) plus a JSON manifest of the
hierarchy, so a host without hdppo's training code can run the team (see docs/deploy.md)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from hdppo.errors import ConfigError
from hdppo.runtime.team import Team

if TYPE_CHECKING:
    from hdppo.policies.mlp import ActorCritic

MANIFEST = "manifest.json"
FORMAT = "hdppo-team-export"
VERSION = 1
OPSET = 18


def _head_output(policy: ActorCritic) -> nn.Module:
    """The action head's last layer: a Box head's `mean`, a Discrete or MultiDiscrete head's `linear`."""
    out = policy.head.mean if hasattr(policy.head, "mean") else policy.head.linear
    if not isinstance(out, nn.Module):
        raise TypeError(f"the action head's output layer is a {type(out).__name__}, not a module")
    return out


class ExportActor(nn.Module):
    """A layer's actor alone: obs [B, D] -> logits [B, A] (Discrete, MultiDiscrete) or mean [B, d] (Box)."""

    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.body = policy.actor_body
        self.out = _head_output(policy)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(obs))


class RoleActor(nn.Module):
    """An actor with role embeddings: obs [B, D], role [B] int64 -> logits or mean."""

    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.roles = policy.actor_roles
        self.body = policy.actor_body
        self.out = _head_output(policy)

    def forward(self, obs: torch.Tensor, role: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(torch.cat([obs, self.roles(role)], dim=-1)))


def actor_module(policy: ActorCritic) -> nn.Module:
    """The exportable actor of a checkpointed ActorCritic (critic dropped)."""
    return (RoleActor(policy) if policy.n_roles > 0 else ExportActor(policy)).eval()


def space_json(space: gym.Space | None) -> dict[str, Any] | None:
    """A Gymnasium space as JSON a host can read."""
    if space is None:
        return None
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).reshape(-1).tolist()}
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "low": np.asarray(space.low).tolist(),
                "high": np.asarray(space.high).tolist()}
    return {"type": type(space).__name__, "repr": repr(space)}


def _hook(fn: Any) -> str | None:
    return None if fn is None else f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def observation_layout(team: Team, i: int) -> list[dict[str, Any]]:
    """The parts of one decision slot's observation of layer i, in order, with their widths."""
    hier, spec, info = team.hier, team.hier.specs[i], team.hier.info[i]
    bottom = i == hier.n_layers - 1
    feat = int(info.feature_space.shape[0])
    state_space = hier.env.state_space      # never None for a use_state layer (HierarchyEnv refuses that)
    state = int(state_space.shape[0]) if spec.use_state and state_space is not None else 0
    parts: list[dict[str, Any]]
    if bottom:
        parts = [{"part": "env_observation", "size": feat - state,
                  "how": "the unit's env observation, flattened (zero-padded to the largest unit's)"}]
    else:
        how = (f"scenario hook observe: {_hook(spec.observe)}" if spec.observe is not None else
               "default: mean over living children of their own features, max over the same, fraction of "
               "children alive (zeros when none live)")
        parts = [{"part": "features", "size": feat - state, "how": how}]
    if spec.attend is not None:
        parts[0]["how"] += (f"; filtered by attend ({_hook(spec.attend)}): features of entities its goal does not keep "
                            f"are 0" + (f", entities {spec.entities}" if spec.entities is not None else ""))
    if state:
        parts.append({"part": "state", "size": state, "how": "the env's global state(), flattened"})
    if i > 0:
        parent = hier.specs[i - 1]
        how = (f"scenario hook goal_features of layer {parent.name!r}: {_hook(parent.goal_features)}"
               if parent.goal_features is not None else
               "one-hot of the goal" if isinstance(parent.goal_space, gym.spaces.Discrete) else "the goal vector")
        goal_features = info.goal_feature_space
        assert goal_features is not None        # every layer below the top receives goals
        parts.append({"part": "goal_features", "size": int(goal_features.shape[0]), "how": how})
    if info.choice == "per_child":
        below = int(hier.info[i + 1].feature_space.shape[0])
        parts.append({"part": "child_features", "size": below, "how": "child j's own features (no goal)"})
        parts.append({"part": "child_position", "size": info.max_children, "how": "one-hot of j"})
    assert sum(p["size"] for p in parts) == info.obs_dim
    return parts


def children(team: Team, i: int) -> dict[str, list[str]]:
    """The children of each node of upper layer i (at export; spatial grouping redoes the squads per episode)."""
    hier = team.hier
    layer_idx, layer_struct = hier.idx[i], hier.struct[i]
    assert layer_idx is not None and layer_struct is not None     # an upper layer has children
    idx, struct = layer_idx[0], layer_struct[0]
    below = [str(n) for n in hier.info[i + 1].nodes]
    return {str(n): [below[idx[k, c]] for c in range(idx.shape[1]) if struct[k, c]]
            for k, n in enumerate(hier.info[i].nodes)}


def manifest(team: Team, models: dict[str, str], source: dict[str, Any]) -> dict[str, Any]:
    hier = team.hier
    layers = []
    for i, (info, spec, desc) in enumerate(zip(hier.info, hier.specs, team.layers)):
        loaded = team._loaded.get(info.name)
        entry: dict[str, Any] = {
            "name": info.name, "index": i, "interval": info.interval, "choice": info.choice,
            "acting": desc.acting, "nodes": desc.nodes, "slots": desc.slots, "obs_dim": info.obs_dim,
            "observation": observation_layout(team, i),
            "action_space": space_json(info.action_space), "goal_space": space_json(spec.goal_space),
            "use_state": spec.use_state}
        if i < hier.n_layers - 1:
            entry["children"] = children(team, i)
            entry["max_children"] = info.max_children
            entry["goal_mask"] = (None if spec.goal_mask is None else
                                  f"scenario hook {_hook(spec.goal_mask)}: bool [nodes, n] (or [nodes, children, n], a "
                                  "row per child slot) of the goals each node may give now; mask the logits of "
                                  "the others out (a slot with none may give any)")
        if loaded is not None:
            head = loaded.module.head
            entry["model"] = {"file": models.get(info.name),
                              "inputs": ["obs"] + (["role"] if loaded.roles is not None else []),
                              "output": "mean" if hasattr(head, "mean") else "logits",
                              "roles": None if loaded.roles is None else [int(r) for r in loaded.roles],
                              "log_std": (head.log_std.detach().numpy().tolist() if hasattr(head, "log_std") else None),
                              "checkpoint": loaded.path}
        layers.append(entry)
    spatial = hier.graph.spatial
    return {"format": FORMAT, "version": VERSION, **source, "scenario_config": _jsonable(team.cfg),
            "units": team.units, "opponents": list(team.env.opponents),
            "unit_action_mask": hier.env.action_mask is not None,
            "spatial_group_size": None if spatial is None else spatial.group_size,
            "gamma": hier.gamma, "layers": layers,
            "acting": ("top layer first; a layer decides at env steps t with t % interval == 0 for every slot "
                       "whose node (and, per_child, child) is alive; its goals go to its living children and "
                       "hold until it decides again; units repeat their action between their decisions")}


def _jsonable(cfg: Any) -> Any:
    import dataclasses
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _onnx_export(module: nn.Module, args: tuple, path: Path, names: list[str], output: str, opset: int) -> None:
    """ONNX with a dynamic batch axis: torch's TorchScript-based exporter (fast, and enough for an MLP),
    else the torch.export-based one where the former is gone."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(module, args, str(path), input_names=names, output_names=[output],
                              dynamic_axes={n: {0: "batch"} for n in names + [output]}, opset_version=opset,
                              dynamo=False)
    except (TypeError, RuntimeError, ImportError):
        batch = torch.export.Dim("batch")
        torch.onnx.export(module, args, str(path), input_names=names, output_names=[output],
                          dynamic_shapes={n: {0: batch} for n in names}, opset_version=opset, dynamo=True)


def export_team(run: str | Path, out: str | Path, fmt: str = "onnx", opset: int = OPSET, *,
                trust_run: bool | None = None, scenario_path: str | None = None) -> Path:
    """Write out/LAYER.onnx (or .pt) per checkpointed layer and out/manifest.json; returns the manifest path.
    `trust_run` and `scenario_path` choose the scenario as for hdppo.load."""
    from hdppo.runfolder import SCENARIO_COPY, load_run_config, resolve_scenario
    from hdppo.runtime.team import load
    if fmt not in ("onnx", "torchscript"):
        raise ConfigError(f"unknown export format {fmt!r}", "use --format onnx or --format torchscript")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
        except ImportError:
            raise ConfigError("ONNX export needs the onnx package", 'pip install -e ".[export]"') from None
    config = load_run_config(run)
    scenario = resolve_scenario(run, config, trust_run=trust_run, scenario=scenario_path)
    team = load(run, deterministic=True, scenario=scenario)           # what the user's trust allowed, once
    if not team._loaded:
        raise ConfigError(f"run {run} has no checkpointed layer to export", "train a layer first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    models = {}
    for name, loaded in team._loaded.items():
        module = actor_module(loaded.module)
        D = int(loaded.module.obs_dim)
        args = (torch.zeros(2, D),) + ((torch.zeros(2, dtype=torch.int64),) if loaded.roles is not None else ())
        if fmt == "onnx":
            names = ["obs", "role"][:len(args)]
            file = f"{name}.onnx"
            output = "mean" if hasattr(loaded.module.head, "mean") else "logits"
            _onnx_export(module, args, out / file, names, output, opset)
        else:
            file = f"{name}.pt"
            torch.jit.script(module).save(str(out / file))
        models[name] = file
    source: dict[str, Any] = {"scenario": scenario, "scenario_overrides": config.get("scenario_overrides", {}),
                              "model_format": fmt, "opset": opset if fmt == "onnx" else None}
    if scenario.endswith(".py"):
        shutil.copyfile(scenario, out / SCENARIO_COPY)
        source["scenario"] = SCENARIO_COPY
    path = out / MANIFEST
    path.write_text(json.dumps(manifest(team, models, source), indent=2))
    return path
