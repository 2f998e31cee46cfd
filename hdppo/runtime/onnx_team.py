"""OnnxTeam: the reference runtime of an exported team, numpy + onnxruntime, no torch.

The per-layer actors run in ONNX; the hierarchy's bookkeeping (schedule, goals, aggregation over
living children, deaths) and the scenario's grounding / observe hooks run in Python exactly as in
`hdppo.load`, so for the same observations it gives the same actions (deterministic mode) within
float tolerance. Use it as the executable specification of docs/deploy.md's manifest.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from hdppo.errors import ConfigError
from hdppo.runtime.action_space import pick, to_space
from hdppo.runtime.team import LayerPolicy, Team
from hdppo.team.interfaces import Decision, LayerInfo


@dataclass
class OnnxPolicy:
    """One layer's exported actor: an onnxruntime session and what the manifest says about it."""

    session: Any
    roles: np.ndarray | None
    log_std: np.ndarray | None
    path: str


def single_thread_options() -> Any:
    """onnxruntime session options for a team's small per-step batches: one thread, no thread pool
    (a pool's threads wait on each other, which on a busy machine stalls a step for milliseconds)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return options


class OnnxTeam(Team):
    """A Team whose checkpointed layers act through their exported ONNX actors."""

    def __init__(self, export_dir: str | Path, deterministic: bool = True, seed: int = 0,
                 overrides: dict[str, Any] | None = None, scripted: Mapping[str, LayerPolicy] | None = None) -> None:
        from hdppo.team.scenario import load_scenario
        self.export_dir = Path(export_dir)
        path = self.export_dir / "manifest.json"
        if not path.is_file():
            raise ConfigError(f"{export_dir} holds no manifest.json", "pass the --out folder of `hdppo export`")
        self.manifest = json.loads(path.read_text())
        if self.manifest.get("model_format") != "onnx":
            raise ConfigError(f"{export_dir} was exported as {self.manifest.get('model_format')!r}, not ONNX",
                              "export with `hdppo export RUN --format onnx`")
        name = self.manifest["scenario"]
        scenario = load_scenario(str(self.export_dir / name) if name.endswith(".py") else name)
        values = dict(self.manifest.get("scenario_overrides", {}))
        values.update({k: str(v) for k, v in (overrides or {}).items()})
        self._by_name = {layer["name"]: layer for layer in self.manifest["layers"]}
        models = {n: str(self.export_dir / layer["model"]["file"]) for n, layer in self._by_name.items()
                  if layer.get("model")}
        super().__init__(scenario, scenario.make_config(values), models, deterministic, seed, scripted)

    def _load_policy(self, info: LayerInfo, path: str) -> OnnxPolicy:
        import onnxruntime as ort
        model = self._by_name[info.name]["model"]
        if self._by_name[info.name]["obs_dim"] != info.obs_dim:
            raise ConfigError(f"exported layer {info.name!r} takes {self._by_name[info.name]['obs_dim']} inputs, "
                              f"the scenario now gives {info.obs_dim}", "export again from the run")
        session = ort.InferenceSession(path, single_thread_options(), providers=["CPUExecutionProvider"])
        roles = None if model["roles"] is None else np.asarray(model["roles"], np.int64)
        log_std = None if model["log_std"] is None else np.asarray(model["log_std"], np.float32)
        return OnnxPolicy(session, roles, log_std, path)

    def _policy_actor(self, info: LayerInfo, loaded: OnnxPolicy) -> LayerPolicy:
        space = info.action_space

        def act(d: Decision) -> np.ndarray:
            E, S, D = d.obs.shape
            feeds = {"obs": np.ascontiguousarray(d.obs, np.float32).reshape(E * S, D)}
            if loaded.roles is not None:
                feeds["role"] = np.tile(loaded.roles, E)
            out = loaded.session.run(None, feeds)[0]
            mask = None if d.action_mask is None else np.asarray(d.action_mask).reshape(E * S, -1)
            rng = None if self.deterministic else self._np_rng
            if isinstance(space, gym.spaces.Box):
                if rng is None:
                    a = out
                else:
                    assert loaded.log_std is not None    # export writes log_std for every Box head
                    a = out + np.exp(loaded.log_std) * rng.standard_normal(out.shape)
            elif isinstance(space, gym.spaces.MultiDiscrete):
                nvec = np.asarray(space.nvec).reshape(-1)
                cuts = np.cumsum(nvec)[:-1]
                masks = [None] * len(nvec) if mask is None else np.split(mask, cuts, axis=1)
                a = np.stack([pick(lg, m, rng) for lg, m in zip(np.split(out, cuts, axis=1), masks)], axis=1)
            else:
                a = pick(out, mask, rng)
            return to_space(a.reshape((E, S) + a.shape[1:]), space)
        return act

    def _seed_streams(self, seed: int) -> None:
        self._np_rng = np.random.default_rng(seed)

    @contextlib.contextmanager
    def _rng(self):
        yield
