"""Observations from a separate simulator process, actions back over a pipe (multi-robot style).

    python examples/deploy/remote_sim.py runs/spread --episodes 2

The simulator process owns the scenario's PettingZoo env (think: a robot fleet's simulator or a
game server); the controller process owns only the trained team. Each step the simulator sends
the living agents' observations, the controller answers with `team.act`'s actions. Works for
scenarios whose hooks read only the observations and whose env has no opponents to drive (spread,
skirmish, grid). The warehouse's grounding reads simulator state, so it needs `sim=` in-process;
battle's blue team would have to be driven inside the simulator process.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))      # run from a checkout without installing

import hdppo


def simulator(conn: Any, scenario: str, cfg: Any) -> None:
    """The simulator process: reset / step its env on request, reply with what the controller needs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from hdppo.team.scenario import load_scenario
    env = load_scenario(scenario).env(cfg)
    while True:
        msg, arg = conn.recv()
        if msg == "reset":
            obs, infos = env.reset(seed=arg)
            conn.send((obs, infos, list(env.agents), {}))
        elif msg == "step":
            obs, rewards, _, _, infos = env.step(arg)
            conn.send((obs, infos, list(env.agents), rewards))
        else:
            env.close()
            conn.close()
            return


def control(run: str, episodes: int, max_steps: int = 10_000) -> list[float]:
    """The controller process: the trained team, fed by the simulator over a Pipe."""
    from hdppo.runfolder import load_run_config, resolve_scenario
    team = hdppo.load(run, deterministic=True)
    scenario = resolve_scenario(run, load_run_config(run))
    ours, theirs = mp.get_context("spawn").Pipe()
    sim = mp.get_context("spawn").Process(target=simulator, args=(theirs, scenario, team.cfg), daemon=True)
    sim.start()
    returns = []
    try:
        for episode in range(episodes):
            ours.send(("reset", episode))
            obs, infos, agents, _ = ours.recv()
            team.reset()
            total, steps = 0.0, 0
            while agents and steps < max_steps:
                actions = team.act(obs, infos, agents=agents)
                ours.send(("step", actions))
                obs, infos, agents, rewards = ours.recv()
                total += sum(rewards.values())
                steps += 1
            returns.append(total)
            print(f"episode {episode}: {steps} steps over the pipe, team return {total:.2f}")
    finally:
        ours.send(("close", None))
        sim.join(timeout=30)
    return returns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("--episodes", type=int, default=2)
    args = p.parse_args(argv)
    control(args.run, args.episodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
