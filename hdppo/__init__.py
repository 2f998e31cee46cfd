"""hdppo: hierarchical multi-agent teams trained with per-layer DPPO.

`hdppo.load(RUN)` returns a trained `Team` to act inside your own loop (see docs/deploy.md).
Imports stay light: torch and the runtime load on first use of these names.
"""
__all__ = ["Team", "load"]


def __getattr__(name: str):
    if name in __all__:
        from . import runtime
        return getattr(runtime, name)
    raise AttributeError(f"module 'hdppo' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (the submodules already imported show up as attributes as usual)."""
    return sorted(__all__)
