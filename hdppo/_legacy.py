"""Module paths from before the team/engine/tools split stay importable.

`hdppo.scenario`, `hdppo.graph`, `hdppo.vecenv`, `hdppo.trainer`, ... are aliases of the modules
that now live under `hdppo.team`, `hdppo.engine`, `hdppo.runtime` and `hdppo.tools`: importing an
old path returns the very same module object (so `monkeypatch` and `isinstance` see one thing),
and `python -m hdppo.netcost` runs the moved module as before. New code imports the new paths, or
the public names in `hdppo` itself.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import CodeType, ModuleType
from typing import Any

MOVED: dict[str, str] = {
    "hdppo.scenario": "hdppo.team.scenario",
    "hdppo.graph": "hdppo.team.graph",
    "hdppo.assembly": "hdppo.team.assembly",
    "hdppo.aggregate": "hdppo.team.aggregate",
    "hdppo.hierarchy": "hdppo.team.hierarchy",
    "hdppo.layer_view": "hdppo.team.layer_view",
    "hdppo.batch_view": "hdppo.team.batch_view",
    "hdppo.vecenv": "hdppo.team.vecenv",
    "hdppo.controllers": "hdppo.team.controllers",
    "hdppo.check": "hdppo.team.check",
    "hdppo.interfaces": "hdppo.team.interfaces",
    "hdppo.config": "hdppo.overrides",
    "hdppo.train_config": "hdppo.engine.config",
    "hdppo.worker": "hdppo.engine.worker",
    "hdppo.server": "hdppo.engine.server",
    "hdppo.ppo": "hdppo.engine.ppo",
    "hdppo.learner": "hdppo.engine.learner",
    "hdppo.buffer": "hdppo.engine.buffer",
    "hdppo.normalize": "hdppo.engine.normalize",
    "hdppo.params": "hdppo.engine.params",
    "hdppo.trainer": "hdppo.engine.trainer",
    "hdppo.loop": "hdppo.engine.loop",
    "hdppo.checkpoint": "hdppo.engine.checkpoint",
    "hdppo.commit": "hdppo.engine.commit",
    "hdppo.resume": "hdppo.engine.resume",
    "hdppo.metrics": "hdppo.engine.metrics",
    "hdppo.diagnostics": "hdppo.engine.diagnostics",
    "hdppo.budget": "hdppo.engine.budget",
    "hdppo.torch_stream": "hdppo.engine.torch_stream",
    "hdppo.backends": "hdppo.engine.backends",
    "hdppo.render": "hdppo.runtime.render",
    "hdppo.bench": "hdppo.tools.bench",
    "hdppo.bench_rllib": "hdppo.tools.bench_rllib",
    "hdppo.bench_scaling": "hdppo.tools.bench_scaling",
    "hdppo.bench_skirmish": "hdppo.tools.bench_skirmish",
    "hdppo.netcost": "hdppo.tools.netcost",
    "hdppo.evidence": "hdppo.tools.evidence",
    "hdppo.ablate": "hdppo.tools.ablate",
    "hdppo.diagnose": "hdppo.tools.diagnose",
}


def new_path(name: str) -> str | None:
    """The current module path of an old one (`hdppo.backends.ray` -> `hdppo.engine.backends.ray`)."""
    parts = name.split(".")
    old = ".".join(parts[:2])
    if old not in MOVED:
        return None
    return ".".join([MOVED[old], *parts[2:]])


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The target module already ran when it was imported."""

    def get_code(self, fullname: str) -> CodeType:
        """`python -m OLD` runs the moved module as __main__."""
        return compile(f"import runpy\nrunpy.run_module({self.target!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname} -> {self.target}>", "exec")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("hdppo."):
            return None
        moved = new_path(fullname)
        if moved is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(moved))


def install() -> None:
    """Register the old paths once. The finder goes first: a submodule of a moved package
    (`hdppo.backends.inline`) would otherwise be found again through the package's path and load
    twice; it answers only for the old names and leaves every other import to the normal finders."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
