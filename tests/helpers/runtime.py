"""Run folders for runtime tests: untrained policies saved exactly as training saves checkpoints."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hdppo.engine.checkpoint import module_state, save_checkpoint
from hdppo.engine.config import LayerConfig, TrainConfig, train_config_to_dict
from hdppo.engine.learner import build_policy, policy_meta
from hdppo.engine.worker import Worker, WorkerSpec, worker_seed
from hdppo.team.hierarchy import HierarchyEnv
from hdppo.team.scenario import load_scenario


def make_run(out: Path, scenario: str, overrides: dict[str, str] | None = None, layers: list[str] | None = None,
             seed: int = 3, **layer_keys) -> Path:
    """A run folder whose `layers` (default all) hold randomly initialised checkpoints."""
    overrides = dict(overrides or {})
    sc = load_scenario(scenario)
    cfg = sc.make_config(overrides)
    hier = HierarchyEnv(sc, cfg, n_envs=1, seed=0)
    names = [info.name for info in hier.info]
    layers = names if layers is None else layers
    tc = TrainConfig(seed=seed, workers=1, envs_per_worker=1, backend="inline")
    for name in names:
        tc.layers[name] = LayerConfig(hidden=(32, 32), **layer_keys)
    out.mkdir(parents=True, exist_ok=True)
    for k, info in enumerate(hier.info):
        if info.name in layers:
            policy = build_policy(info, tc.layers[info.name], 100 + k)
            save_checkpoint(out / "checkpoints" / info.name, module_state(policy),
                            policy_meta(info, tc.layers[info.name]))
    hier.close()
    config = {"scenario": scenario, "scenario_name": sc.name, "scenario_overrides": overrides,
              "train": train_config_to_dict(tc), "layers": layers, "frozen": {}, "layer_names": names}
    (out / "config.json").write_text(json.dumps(config, default=str))
    return out


def worker_actions(run: Path, steps: int, seed: int, deterministic: bool = True,
                   across_episodes: bool = False) -> list[dict[str, object]]:
    """Per env step, the units' env actions the training-time Worker path takes (one env copy); the
    first episode's, or `steps` steps of episodes in a row (the copy resets itself, as in training)."""
    from hdppo.runfolder import load_run_config, team_checkpoints
    config = load_run_config(run)
    train = dict(config["train"], seed=seed, envs_per_worker=1)
    spec = WorkerSpec(config["scenario"], config["scenario_overrides"], train, worker_id=0, trained=[],
                      frozen=team_checkpoints(run, config), deterministic=deterministic)
    worker = Worker(spec, None)
    hier = worker.hier
    out = []
    try:
        for _ in range(steps):
            alive = hier.env.alive[0].copy()
            result = hier.step(worker._act)
            acts = hier._env_actions[0]
            out.append({u: np.asarray(acts[i]).tolist() for i, u in enumerate(hier.env.units) if alive[i]})
            if result.done.any() and not across_episodes:
                break
    finally:
        worker.close()
    return out


def team_actions(run: Path, steps: int, seed: int, deterministic: bool = True, team=None,
                 across_episodes: bool = False, after_act=None) -> list[dict[str, object]]:
    """The same episode (or episodes, as worker_actions) acted by hdppo.load(run) (or `team`) over the
    scenario's own one-copy batch (seeded as a worker's); the team is reset at each new episode.
    `after_act(team)` runs after each of the team's acts."""
    import hdppo
    from hdppo.runfolder import load_run_config
    config = load_run_config(run)
    sc = load_scenario(config["scenario"])
    cfg = sc.make_config(config["scenario_overrides"])
    wseed = worker_seed(seed, 0)
    team = team if team is not None else hdppo.load(run, deterministic=deterministic, seed=wseed)
    if sc.batched_env is not None:
        env = sc.batched_env(cfg, 1, wseed)
    else:
        from hdppo.team.assembly import make_env_and_graph
        env, _ = make_env_and_graph(sc, cfg, 1, wseed, sc.build_layers(cfg))
    env.reset(seed=wseed)
    team.reset()
    out = []
    try:
        for _ in range(steps):
            units = [u for i, u in enumerate(env.units) if env.alive[0, i]]
            obs = {u: env.obs[0, i] for i, u in enumerate(env.units)}
            masks = None if env.action_mask is None else {u: {"action_mask": env.action_mask[0, i]}
                                                          for i, u in enumerate(env.units)}
            state = env.state()[0] if env.state_space is not None else None
            acts = team.act(obs, masks, agents=units, state=state, sim=env)
            if after_act is not None:
                after_act(team)
            out.append({u: np.asarray(a).tolist() for u, a in acts.items()})
            arr = np.zeros((1, len(env.units)) + tuple(env.action_space.shape or ()), env.action_space.dtype)
            for i, u in enumerate(env.units):
                if u in acts:
                    arr[0, i] = acts[u]
            done = env.step(arr).done
            if done.any() and not across_episodes:
                break
            if done.any():
                env.reset_done(done)
                team.reset()
    finally:
        env.close()
    return out
