"""One JaxMARL baseline run on SMAX, in JaxMARL's own venv (vs_jaxmarl.py makes it and calls this).

    python _jaxmarl_run.py --repo JAXMARL_CLONE --algo ippo --map 3m --frames 2000000 --seed 0 --out DIR

Runs JaxMARL's published SMAX baseline unmodified: the module `baselines/IPPO/ippo_rnn_smax.py`
(or `baselines/MAPPO/mappo_rnn_smax.py`) of a clone of the JaxMARL repository, imported from the
clone, with its own YAML config (`config/ippo_rnn_smax.yaml`, `config/mappo_homogenous_rnn_smax.yaml`);
only MAP_NAME, SEED and TOTAL_TIMESTEPS are set, the seed handled as the script's own `main` does.
The training curve is what the baseline logs each update (its `wandb.log` call, captured here with
wandb disabled, as the config has it). After training, the final actor plays `--eval-episodes`
fresh episodes (seeds distinct from training's), sampled and greedy, and the win is counted as
hdppo's SMAX adapter counts it: every enemy dead and an ally alive when the episode ends.
Writes DIR/result.json.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ALGOS = {  # algo -> (baseline module, its config, the seed handling of its main())
    "ippo": ("baselines/IPPO/ippo_rnn_smax.py", "baselines/IPPO/config/ippo_rnn_smax.yaml", "vmap_seeds"),
    "mappo": ("baselines/MAPPO/mappo_rnn_smax.py", "baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml", "key"),
}


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"jaxmarl_baseline_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path} as a Python module: is the JaxMARL checkout complete?")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def load_config(path: Path, map_name: str, seed: int, frames: int) -> dict:
    from omegaconf import OmegaConf
    os.environ.setdefault("WANDB_ENTITY", "")            # the IPPO config reads it; wandb stays disabled
    config = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    config.update(MAP_NAME=map_name, SEED=seed, TOTAL_TIMESTEPS=frames)
    return config


def actor_params(algo: str, out: dict):
    """The trained actor's parameters from make_train's output (IPPO: one actor-critic; MAPPO: the actor)."""
    runner_state = out["runner_state"][0]
    train_state = runner_state[0]
    return train_state.params if algo == "ippo" else train_state[0].params


def evaluate(module, algo: str, config: dict, params, episodes: int, seed: int, greedy: bool) -> list[float]:
    """Wins of `episodes` fresh episodes of the trained actor, run side by side until each ends."""
    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario

    env = HeuristicEnemySMAX(scenario=map_name_to_scenario(config["MAP_NAME"]), **config["ENV_KWARGS"])
    action_space: Any = env.action_space(env.agents[0])      # a JaxMARL Discrete
    n_allies, n_actions = env.num_agents, action_space.n
    actors = episodes * n_allies
    net = (module.ActorCriticRNN(n_actions, config=config) if algo == "ippo"
           else module.ActorRNN(n_actions, config=config))

    def policy_step(carry, _):
        obs, state, hstate, last_done, finished, won, key = carry
        avail = module.batchify(jax.vmap(env.get_avail_actions)(state), env.agents, actors)
        obs_b = module.batchify(obs, env.agents, actors)
        hstate, pi = net.apply(params, hstate, (obs_b[None], last_done[None], avail))[:2]
        key, k_act, k_env = jax.random.split(key, 3)
        action = (pi.mode() if greedy else pi.sample(seed=k_act)).squeeze(0)
        env_act = {a: v.squeeze(-1) for a, v in module.unbatchify(action, env.agents, episodes, n_allies).items()}
        obs, state, _, done, _ = jax.vmap(env.step_env)(jax.random.split(k_env, episodes), state, env_act)
        alive = state.state.unit_alive
        win_now = alive[:, :env.num_allies].any(axis=1) & ~alive[:, env.num_allies:].any(axis=1)
        ends = done["__all__"] & ~finished
        won = jnp.where(ends, win_now.astype(jnp.float32), won)
        last_done = module.batchify(done, env.agents, actors).squeeze()
        return (obs, state, hstate, last_done, finished | done["__all__"], won, key), None

    key = jax.random.PRNGKey(seed)
    key, k_reset = jax.random.split(key)
    obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
    hstate = module.ScannedRNN.initialize_carry(actors, config["GRU_HIDDEN_DIM"])
    carry = (obs, state, hstate, jnp.zeros(actors, dtype=bool), jnp.zeros(episodes, dtype=bool),
             jnp.zeros(episodes), key)
    carry, _ = jax.jit(lambda c: jax.lax.scan(policy_step, c, None, env.max_steps + 2))(carry)
    finished, won = carry[4], carry[5]
    if not bool(finished.all()):
        raise RuntimeError("an evaluation episode did not end within max_steps + 2 steps")
    return [float(w) for w in won]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", required=True, help="a clone of the JaxMARL repository (its baselines/ folder)")
    p.add_argument("--algo", choices=sorted(ALGOS), required=True)
    p.add_argument("--map", required=True)
    p.add_argument("--frames", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    start = time.perf_counter()
    import jax

    repo = Path(args.repo)
    module_file, config_file, seeding = ALGOS[args.algo]
    module = load_module(repo / module_file)
    config = load_config(repo / config_file, args.map, args.seed, args.frames)
    curve: list[dict] = []
    module.wandb.log = lambda row: curve.append({k: float(v) for k, v in row.items()})   # wandb stays disabled
    rng = jax.random.PRNGKey(config["SEED"])
    train = jax.jit(module.make_train(config))          # make_train also fills config's derived keys
    if seeding == "vmap_seeds":       # ippo_rnn_smax.main: vmap over NUM_SEEDS keys split from SEED
        config["NUM_SEEDS"] = 1
        rngs = jax.random.split(rng, 1)
        out = jax.block_until_ready(jax.vmap(train)(rngs))
        out = jax.tree.map(lambda x: x[0], out)
    else:                             # mappo_rnn_smax.main: the SEED key itself
        out = jax.block_until_ready(train(rng))
    train_s = time.perf_counter() - start
    params = actor_params(args.algo, out)
    frames = int(config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"])
    eval_seed = 1000 + args.seed
    eval_start = time.perf_counter()
    sampled = evaluate(module, args.algo, config, params, args.eval_episodes, eval_seed, greedy=False)
    greedy = evaluate(module, args.algo, config, params, args.eval_episodes, eval_seed, greedy=True)
    eval_s = time.perf_counter() - eval_start
    result = {
        "framework": "jaxmarl", "arm": f"jaxmarl_{args.algo}", "map": args.map, "seed": args.seed,
        "frames": frames, "frames_asked": args.frames, "train_s": train_s, "eval_s": eval_s,
        "win_sampled": sum(sampled) / len(sampled), "win_greedy": sum(greedy) / len(greedy),
        "eval_episodes": args.eval_episodes, "eval_seed": eval_seed,
        "curve": [(int(r["env_step"]) + int(config["NUM_STEPS"] * config["NUM_ENVS"]), r["win_rate"], r["returns"])
                  for r in curve if "env_step" in r],
        "config": {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool, dict))},
        "module": module_file, "config_file": config_file,
        "versions": {"python": platform.python_version(),
                     **{m: metadata.version(m) for m in ("jaxmarl", "jax", "flax", "optax", "distrax")}},
        "jax_devices": [str(d) for d in jax.devices()],
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "result.json").write_text(json.dumps(result, indent=1))
    print(f"{args.algo} {args.map} seed {args.seed}: {frames:,} frames in {train_s:.0f} s, "
          f"win {result['win_sampled']:.2f} sampled, {result['win_greedy']:.2f} greedy")


if __name__ == "__main__":
    main()
