"""`hdppo export`: each trained layer's actor as ONNX or TorchScript (hdppo.runtime.export)."""
from __future__ import annotations

import argparse

from hdppo.cli.common import add_trust_flags, positive_int


def add(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", parents=parents,
                       help="each trained layer's actor as ONNX (or TorchScript) plus a manifest of the hierarchy")
    p.add_argument("run", help="a run folder written by `hdppo train`")
    p.add_argument("--format", default="onnx", help="onnx (default) or torchscript")
    p.add_argument("--out", help="folder to write (default RUN/export)")
    p.add_argument("--opset", type=positive_int, default=18, help="ONNX opset")
    add_trust_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hdppo.cli.common import out_folder
    from hdppo.runtime.export import export_team
    out = out_folder(args.out) if args.out else Path(args.run) / "export"
    path = export_team(args.run, out, args.format, args.opset, trust_run=args.trust_run,
                       scenario_path=args.scenario_file)
    print(f"wrote {path} and the layers' {args.format} models next to it")
    return 0
