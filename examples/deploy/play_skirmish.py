"""A trained skirmish team inside a plain loop over the one-copy PettingZoo env: no workers, no servers.

    hdppo train skirmish --steps 300000 --out runs/skirmish
    python examples/deploy/play_skirmish.py runs/skirmish --episodes 5 difficulty=0.8

The loop is the ordinary PettingZoo one; `team.act` replaces the policy call. Pass `agents=env.agents`
so units that died at the last step count as dead at once (PettingZoo still returns their final
observation), and `infos` so each unit's legal-action mask is honoured.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))      # run from a checkout without installing

import hdppo
from hdppo.scenarios.skirmish import SkirmishParallelEnv


def play(run: str, episodes: int, overrides: dict[str, str], deterministic: bool) -> list[dict]:
    team = hdppo.load(run, deterministic=deterministic, overrides=overrides)
    env = SkirmishParallelEnv(team.cfg)            # the run's scenario config, with the overrides
    results = []
    for episode in range(episodes):
        observations, infos = env.reset(seed=episode)
        team.reset()
        team_return, steps = 0.0, 0
        while env.agents:
            actions = team.act(observations, infos, agents=env.agents)
            if steps == 0:
                print(f"episode {episode}: squad goals at the start {team.goals().get('mid', {})}")
            observations, rewards, terminations, truncations, infos = env.step(actions)
            team_return += sum(rewards.values())
            steps += 1
        outcome = env.batch.episode_info(0)           # win / draw / points held, before the next reset
        results.append({"steps": steps, "team_return": team_return, **outcome})
        print(f"episode {episode}: {steps} steps, team return {team_return:.2f}, win {outcome.get('win', 0):.0f}")
    env.close()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a skirmish run folder written by `hdppo train skirmish`")
    p.add_argument("overrides", nargs="*", help="scenario keys, key=value (e.g. difficulty=0.8)")
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--sample", action="store_true", help="sample actions instead of taking the most likely")
    args = p.parse_args(argv)
    overrides = dict(kv.split("=", 1) for kv in args.overrides)
    results = play(args.run, args.episodes, overrides, deterministic=not args.sample)
    wins = sum(r.get("win", 0.0) for r in results)
    print(f"won {wins:.0f} of {len(results)} episodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
