"""`hdppo render`: a run's episodes as a GIF or MP4 (hdppo.runtime.render)."""
from __future__ import annotations

import argparse

from hdppo.cli.common import add_trust_flags, int_in, positive_int, seed_int

PIXELS_MIN, PIXELS_MAX = 32, 4096


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", parents=parents,
                       help="play a run's team and write the episodes as a GIF or MP4 (squads, goals)")
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("overrides", nargs="*", help="scenario config overrides, key=value")
    p.add_argument("--out", default="episode.gif", help="episode.gif or episode.mp4 (MP4 needs imageio-ffmpeg)")
    p.add_argument("--episodes", type=int_in(1, 10_000), default=1)
    p.add_argument("--max-steps", type=positive_int, default=1000, help="stop an episode after this many steps")
    p.add_argument("--every", type=positive_int, default=1, help="draw every Nth step")
    p.add_argument("--fps", type=int_in(1, 100), default=10, help="frames per second (1 to 100)")
    p.add_argument("--pixels", type=int_in(PIXELS_MIN, PIXELS_MAX), default=320,
                   help=f"frame width and height ({PIXELS_MIN} to {PIXELS_MAX})")
    p.add_argument("--seed", type=seed_int, default=0, help="episode k resets the env with seed + k")
    p.add_argument("--sample", action="store_true", help="sample actions instead of the most likely")
    add_trust_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hdppo.cli.common import out_file
    from hdppo.engine.preflight import available_memory, gib
    from hdppo.errors import ConfigError
    from hdppo.overrides import parse_assignments
    from hdppo.runtime.render import render_episodes
    out_file(args.out, example="episode.gif")
    frames = args.episodes * -(-args.max_steps // args.every)          # the most frames the episodes can give
    need, free = frames * args.pixels ** 2 * 3, available_memory()      # RGB frames, all held until written
    if need > free:
        raise ConfigError(f"up to {frames:,} frames of {args.pixels} x {args.pixels} pixels need {gib(need)} of "
                          f"memory, more than the {gib(free)} available",
                          "lower --pixels or --max-steps, or draw fewer steps with --every")
    out, count = render_episodes(args.run, args.out, args.episodes, parse_assignments(args.overrides),
                                 max_steps=args.max_steps, every=args.every, fps=args.fps, pixels=args.pixels,
                                 deterministic=not args.sample, seed=args.seed, trust_run=args.trust_run,
                                 scenario_path=args.scenario_file)
    print(f"wrote {out} ({count} frames)")
    return 0
