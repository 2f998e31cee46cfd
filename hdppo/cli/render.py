"""`hdppo render`: a run's episodes as a GIF or MP4 (hdppo.runtime.render)."""
from __future__ import annotations

import argparse

from hdppo.cli.common import add_trust_flags


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", parents=parents,
                       help="play a run's team and write the episodes as a GIF or MP4 (squads, goals)")
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    p.add_argument("--out", default="episode.gif", help="episode.gif or episode.mp4 (MP4 needs imageio-ffmpeg)")
    p.add_argument("--episodes", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=1000, help="stop an episode after this many steps")
    p.add_argument("--every", type=int, default=1, help="draw every Nth step")
    p.add_argument("--fps", type=int, default=10)
    p.add_argument("--pixels", type=int, default=320, help="frame width and height")
    p.add_argument("--seed", type=int, default=0, help="episode k resets the env with seed + k")
    p.add_argument("--sample", action="store_true", help="sample actions instead of the most likely")
    add_trust_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hdppo.overrides import parse_assignments
    from hdppo.runtime.render import render_episodes
    out, frames = render_episodes(args.run, args.out, args.episodes, parse_assignments(args.overrides),
                                  max_steps=args.max_steps, every=args.every, fps=args.fps, pixels=args.pixels,
                                  deterministic=not args.sample, seed=args.seed, trust_run=args.trust_run,
                                  scenario_path=args.scenario_file)
    print(f"wrote {out} ({frames} frames)")
    return 0
