"""Training config: the one place every DPPO default lives. Overridden by YAML or key=value.

Routing of a `key=value` override (see `resolve_overrides`): a TrainConfig field (`steps=1e6`), a
LayerConfig field for every layer (`lr=1e-3`), `LAYER.field` for one layer (`low.rollout=128`),
`scenario.KEY` or any other key for the scenario config (`n_agents=4`, `w_int.low=0.2`).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from hdppo.engine.tracking import check_track
from hdppo.errors import ConfigError
from hdppo.overrides import apply_overrides


def default_workers() -> int:
    """About 75% of the CPU cores, at least 1."""
    return max(1, round(0.75 * (os.cpu_count() or 1)))


ROLLOUT_CAP = 256       # default rollout: at most this many env steps per copy


@dataclass
class LayerConfig:
    """DPPO knobs of one layer: its parameter server, its pool and its policy."""

    # PPO
    lr: float = 3e-4
    lr_decay: bool = False                # linear to 0 over the run (see docs/engine.md)
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    vf_coef: float = 0.5
    clip_vloss: bool = True               # PPO2's clipped value loss, in the critic's standardised units
    ent_coef: float = 0.01                # decays linearly to ent_coef_final
    ent_coef_final: float = 0.001
    max_grad_norm: float = 0.5
    epochs: int = 16                      # most passes over each batch (MAPPO's paper: 15; see docs/engine.md)
    target_kl: float = 0.0                # end a batch's epochs once an epoch's mean approx KL passes it; 0 = off
    minibatches: int = 4
    norm_adv: bool = True
    reward_norm: bool = False             # per-worker running normalisation of rewards (see docs/engine.md)
    value_norm: bool = True               # the critic learns standardised returns (running mean/std)
    # pool and server
    rollout: int = 0                      # env steps per env copy between updates; 0 = see rollout_steps
    pool: int = 0                         # workers whose data this layer learns from; 0 = all
    mode: str = "gradients"               # a name in hdppo.engine.modes.MODES: gradients or experience
    sync: Literal["sync", "async"] = "sync"
    max_staleness: int = 3
    sync_every: int = 0                   # async: env steps between parameter pulls; 0 = every rollout
    aggregate: Literal["samples", "uniform", "return"] = "samples"
    # policy
    policy: str = "mlp"
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    roles: bool = False                   # role embedding per slot (unit index or child position)
    centralized: bool = True              # critic reads the layer's joint state (mean/max over slots)

    def rollout_steps(self, interval: int) -> int:
        """Env steps per copy between two updates: `rollout`, or by default 64 decisions capped at
        256 env steps (a whole number of intervals, at least one), so a slow layer (a commander
        deciding every 16 steps) still updates every 256 steps instead of every 1,024."""
        if self.rollout > 0:
            return self.rollout
        return max(interval, min(64 * interval, ROLLOUT_CAP) // interval * interval)


@dataclass
class TrainConfig:
    """A training run: budget, workers, backend, schedule, and the per-layer configs."""

    steps: int = 200_000                  # env steps (one step = every copy's units act once) in all
    seed: int = 0
    workers: int = 0                      # 0 = about 75% of the cores
    envs_per_worker: int = 16
    backend: Literal["inline", "process", "ray"] = "process"
    schedule: Literal["concurrent", "bottom-up"] = "concurrent"
    finetune: float = 0.0                 # bottom-up: fraction of steps for a final joint stage
    checkpoint_every: int = 20            # a run commit at least every this many updates of a layer
    checkpoint_seconds: float = 60.0      # a run commit (state + every layer) at least this often, and at the end
    worker_timeout: float = 300.0         # seconds a worker call may take (scaled by the work asked)
                                          # before it counts as hung
    log_every: float = 5.0                # seconds between metric rows
    progress: str = "auto"                # auto: a live table on a terminal, a line every few seconds
                                          # elsewhere; lines: the lines everywhere; off: nothing
    device: str = "cpu"                   # where servers train in experience mode
    address: str = ""                     # ray: cluster to join (HOST:6379); "" = RAY_ADDRESS or a local Ray
    worker_cpus: float = 1.0              # ray: CPUs each worker actor asks for
    worker_gpus: float = 0.0              # ray: GPUs each worker actor asks for
    worker_restarts: int = 3              # ray: how often each worker's actor is recreated after it dies
    eval_every: int = 0                   # env steps between evaluations during training; 0 = off
    eval_episodes: int = 10               # fresh episodes per evaluation during training
    eval_deterministic: bool = False      # evaluations act greedily instead of sampling
    eval_metric: str = ""                 # eval column that picks checkpoints/best ("" = return/TOP_LAYER;
                                          # a leading '-' = lower is better), see hdppo/engine/evaluation.py
    track: str = "none"                   # also log metrics, config and summary to wandb or mlflow (in the
                                          # run folder unless their env vars say otherwise; engine/tracking.py)
    layers: dict[str, LayerConfig] = field(default_factory=dict)

    def n_workers(self) -> int:
        return self.workers if self.workers > 0 else default_workers()

    def layer(self, name: str) -> LayerConfig:
        return self.layers.setdefault(name, LayerConfig())


TRAIN_KEYS = {f.name for f in dataclasses.fields(TrainConfig)} - {"layers"}
LAYER_KEYS = {f.name for f in dataclasses.fields(LayerConfig)}


# TrainConfig fields that do not change what training does (the budget, the display, commit and log
# intervals, timeouts, the Ray address, restarts, tracking): runs differing only in these are the same run
# (hdppo plot groups them as seeds of one config; the evidence studies reuse them).
NOT_TRAINING = frozenset({"steps", "progress", "checkpoint_every", "checkpoint_seconds", "worker_timeout", "log_every",
                          "address", "worker_restarts",
                          "eval_every", "eval_episodes", "eval_deterministic", "eval_metric", "track"})


def resolve_overrides(overrides: dict[str, Any], layer_names: list[str], scenario_keys: set[str],
                      base: TrainConfig | None = None) -> tuple[TrainConfig, dict[str, Any]]:
    """Split overrides into a TrainConfig (with one LayerConfig per layer) and scenario overrides."""
    cfg = base if base is not None else TrainConfig()
    for name in layer_names:
        cfg.layer(name)
    train: dict[str, Any] = {}
    every_layer: dict[str, Any] = {}
    per_layer: dict[str, dict[str, Any]] = {n: {} for n in layer_names}
    scenario: dict[str, Any] = {}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if head == "scenario" and rest:
            scenario[rest] = value
        elif head == "train" and rest:
            train[rest] = value
        elif key in TRAIN_KEYS:
            train[key] = value
        elif key in LAYER_KEYS:
            every_layer[key] = value
        elif head in per_layer and rest:
            if rest.split(".")[0] not in LAYER_KEYS:
                raise ConfigError(f"layer {head!r} has no setting {rest!r}",
                                  f"use one of: {', '.join(sorted(LAYER_KEYS))}")
            per_layer[head][rest] = value
        elif head in scenario_keys:
            scenario[key] = value
        else:
            raise ConfigError(
                f"unknown setting {key!r}",
                f"use a training key ({', '.join(sorted(TRAIN_KEYS))}), a layer key for all layers or as "
                f"LAYER.key with LAYER in {layer_names} ({', '.join(sorted(LAYER_KEYS))}), or a scenario key "
                f"({', '.join(sorted(scenario_keys))})")
    cfg = apply_overrides(cfg, train, what="training config")
    for name in layer_names:
        layer = apply_overrides(cfg.layers[name], every_layer, what=f"layer {name!r} config")
        cfg.layers[name] = apply_overrides(layer, per_layer[name], what=f"layer {name!r} config")
    check_train_config(cfg)
    return cfg, scenario


PROGRESS_MODES = ("auto", "lines", "off")


def progress_mode(value: Any) -> str:
    """`progress` as one of PROGRESS_MODES; a boolean keeps the meaning it had (a run folder's
    config.json and `progress=false` from before): true -> auto, false -> lines."""
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return "auto"
    if text in ("false", "0", "no"):
        return "lines"
    if text not in PROGRESS_MODES:
        raise ConfigError(f"value {value!r} for 'progress' is not one of {list(PROGRESS_MODES)}",
                          "pass progress=auto (a live table on a terminal), lines or off")
    return text


def check_train_config(cfg: TrainConfig) -> None:
    """Refuse well-formed values outside their range (a negative budget, zero envs, ...)."""
    def need(ok: bool, key: str, value: Any, rule: str) -> None:
        if not ok:
            raise ConfigError(f"value {value!r} for {key!r} is out of range", f"pass {key} {rule}")
    need(cfg.steps >= 1, "steps", cfg.steps, ">= 1")
    need(cfg.workers >= 0, "workers", cfg.workers, ">= 0 (0 = about 75% of the cores)")
    need(cfg.envs_per_worker >= 1, "envs_per_worker", cfg.envs_per_worker, ">= 1")
    need(0.0 <= cfg.finetune < 1.0, "finetune", cfg.finetune, "in [0, 1)")
    need(cfg.checkpoint_every >= 1, "checkpoint_every", cfg.checkpoint_every, ">= 1")
    need(cfg.worker_restarts >= 0, "worker_restarts", cfg.worker_restarts, ">= 0 (0 = never restart)")
    need(0 <= cfg.seed <= 2 ** 32 - 1, "seed", cfg.seed,
         ">= 0 and <= 4294967295 (the seeds derived from it must fit torch's)")
    need(_finite(cfg.checkpoint_seconds) and cfg.checkpoint_seconds > 0, "checkpoint_seconds",
         cfg.checkpoint_seconds, "> 0 (seconds between run commits)")
    need(_finite(cfg.worker_timeout) and cfg.worker_timeout > 0, "worker_timeout", cfg.worker_timeout,
         "> 0 (seconds)")
    need(_finite(cfg.log_every) and cfg.log_every >= 0, "log_every", cfg.log_every, ">= 0 (seconds; 0 = every round)")
    need(_finite(cfg.worker_cpus) and cfg.worker_cpus > 0, "worker_cpus", cfg.worker_cpus, "> 0")
    need(_finite(cfg.worker_gpus) and cfg.worker_gpus >= 0, "worker_gpus", cfg.worker_gpus, ">= 0")
    check_eval_keys(cfg, need)
    check_device(cfg.device)
    cfg.progress = progress_mode(cfg.progress)
    cfg.track = check_track(cfg.track)
    for name, lc in cfg.layers.items():     # the mode's name is checked against MODES by RunSpec and
        check_layer_ranges(name, lc, need)    # the Trainer (modes.py builds on this module, not under it)
    for name, lc in cfg.layers.items():
        for key, ok, rule in (("lr", lc.lr > 0, "> 0"), ("epochs", lc.epochs >= 1, ">= 1"),
                              ("target_kl", _finite(lc.target_kl) and lc.target_kl >= 0, ">= 0 (0 = every epoch)"),
                              ("minibatches", lc.minibatches >= 1, ">= 1"), ("rollout", lc.rollout >= 0, ">= 0"),
                              ("pool", lc.pool >= 0, ">= 0"), ("clip_eps", lc.clip_eps > 0, "> 0"),
                              ("gae_lambda", 0.0 <= lc.gae_lambda <= 1.0, "in [0, 1]"),
                              ("max_staleness", lc.max_staleness >= 0, ">= 0"),
                              ("sync_every", lc.sync_every >= 0, ">= 0")):
            need(ok, f"{name}.{key}", getattr(lc, key), rule)


EVAL_COLUMN = r"-?(return/[A-Za-z0-9_.\-]+|team_return|length|outcome/[A-Za-z0-9_.\-]+)"


def check_eval_keys(cfg: TrainConfig, need: Any) -> None:
    """Ranges of the evaluation-during-training keys; eval_metric's layer or outcome is checked
    against the scenario by the Trainer and the first evaluation (hdppo/engine/evaluation.py)."""
    import re
    need(isinstance(cfg.eval_every, int) and cfg.eval_every >= 0, "eval_every", cfg.eval_every,
         ">= 0 (env steps between evaluations; 0 = off)")
    need(isinstance(cfg.eval_episodes, int) and cfg.eval_episodes >= 1, "eval_episodes", cfg.eval_episodes,
         ">= 1 (episodes per evaluation)")
    need(cfg.eval_metric == "" or bool(re.fullmatch(EVAL_COLUMN, str(cfg.eval_metric))), "eval_metric",
         cfg.eval_metric, "as an eval column: return/LAYER, team_return, length or outcome/KEY (e.g. outcome/win), "
         "with a leading '-' when lower is better; or '' for the top layer's return")


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def check_layer_ranges(name: str, lc: LayerConfig, need: Any) -> None:
    """Ranges of the PPO coefficients and the network shape of one layer (a negative max_grad_norm
    would flip the gradient; gamma is the scenario's, see ScenarioConfig)."""
    for key, ok, rule in (
            ("lr", _finite(lc.lr) and lc.lr > 0, "> 0"),
            ("max_grad_norm", _finite(lc.max_grad_norm) and lc.max_grad_norm > 0, "> 0 (the gradient's norm cap)"),
            ("clip_eps", _finite(lc.clip_eps) and lc.clip_eps > 0, "> 0"),
            ("vf_coef", _finite(lc.vf_coef) and lc.vf_coef >= 0, ">= 0"),
            ("ent_coef", _finite(lc.ent_coef) and lc.ent_coef >= 0, ">= 0"),
            ("ent_coef_final", _finite(lc.ent_coef_final) and lc.ent_coef_final >= 0, ">= 0")):
        need(ok, f"{name}.{key}", getattr(lc, key), rule)
    hidden = tuple(lc.hidden) if isinstance(lc.hidden, (list, tuple)) else (lc.hidden,)
    need(all(isinstance(h, int) and not isinstance(h, bool) and h > 0 for h in hidden), f"{name}.hidden", lc.hidden,
         "as sizes > 0, e.g. hidden=64,64")
    from hdppo.policies.factory import POLICIES
    from hdppo.policies.mlp import ACTIVATIONS
    need(lc.activation in ACTIVATIONS, f"{name}.activation", lc.activation, f"as one of {', '.join(ACTIVATIONS)}")
    need(lc.policy in POLICIES, f"{name}.policy", lc.policy, f"as one of {', '.join(sorted(POLICIES))}")


def check_device(device: str) -> None:
    """`cpu`, `cuda`, `cuda:N` (when torch sees that GPU) or `mps`; anything else is refused here,
    before any process starts."""
    import re
    if device == "cpu":
        return
    if not re.fullmatch(r"cuda(:\d+)?|mps", str(device)):
        raise ConfigError(f"device {device!r} is not a torch device hdppo trains on",
                          "pass device=cpu, device=cuda, device=cuda:N or device=mps")
    import torch
    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise ConfigError(f"device {device!r} is not available here (torch sees {torch.cuda.device_count()} "
                              "CUDA device(s))", "pass device=cpu, or run on a machine with that GPU")
    elif not torch.backends.mps.is_available():
        raise ConfigError("device 'mps' is not available here", "pass device=cpu")


def train_config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def train_config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuild a TrainConfig from `train_config_to_dict` (e.g. a run's config.json)."""
    data = dict(data)
    layers = data.pop("layers", {}) or {}
    top = {k: v for k, v in data.items() if k in TRAIN_KEYS}
    cfg = apply_overrides(TrainConfig(), top, what="training config")
    for name, values in layers.items():
        cfg.layers[name] = apply_overrides(LayerConfig(), dict(values), what=f"layer {name!r} config")
    cfg.progress = progress_mode(cfg.progress)        # a boolean from a run folder written before
    return cfg
