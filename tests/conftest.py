"""Fixtures shared by the test folders, and the markers of the fast run.

Markers follow folders: a test under a `slow/` folder or under `faults/` is `slow` (it trains or
evaluates for seconds); a test under `ray/` starts a local Ray (`ray`). The fast run,
`python -m pytest -m "not slow and not ray"`, stays well under a minute; the README's test command
runs everything, on two processes (`-n 2`) with every Ray-starting test on one of them.

The tests of a module with a module-scoped fixture share a worker too, so the fixture is built once;
so do the tests marked `jaxmarl` (they compile JaxMARL envs in the test process), so each env's
jitted step compiles once per run, not once per worker (SMAX: tens of seconds a shape on a clean clone).
A test of tens of seconds or more on the CI machine says so with `@pytest.mark.long(SECONDS)`; those
run first among the single tests, longest first, so under `-n 2` no long test is left to run alone
at the end (the groups go out before them, largest first: xdist's loadscope reorder).
"""
from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, TESTS, TINY

# Before anything imports Ray: a Ray the tests start binds loopback only. On Linux Ray's default takes
# the machine's routable address and listens on every interface; this switch (read once, when Ray is
# imported, and inherited by the Ray processes and by the `hdppo` subprocesses of the tests) makes it
# use 127.0.0.1, as Ray does on a laptop. tests/ray/test_ray_loopback.py checks it holds.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

# JAX's compilation cache (hdppo.sims.jaxmarl) in the checkout, not the user's: a clean clone starts
# cold and every JaxMARL process of the run after the first compile of a step loads it
os.environ.setdefault("HDPPO_JAX_CACHE", str(TESTS.parent / ".jax-cache"))

# The project's own code, compiled once per run before any test starts (see pytest_configure)
SOURCES = ("hdppo", "scenarios", "policies", "examples", "tests")

SLOW_FOLDERS = {"slow", "faults"}
RAY_FOLDERS = {"ray"}


def pytest_configure(config: pytest.Config) -> None:
    """Where Python may not write bytecode (PYTHONDONTWRITEBYTECODE, set on some CI machines), every
    process the tests start (hundreds: `hdppo` subprocesses, spawned workers, Ray's workers) would
    compile the project's sources again; compile them once here, in the run's first process (xdist's
    controller, before its workers start). compileall writes the .pyc files whatever that setting says,
    and Python reads them either way; a source already compiled is skipped."""
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):
        for name in SOURCES:          # scenarios/ and policies/ by name: compileall skips hdppo's symlinks to them
            compileall.compile_dir(ROOT / name, quiet=2)     # a read-only checkout: nothing written, no noise


def long_seconds(item: pytest.Item) -> float:
    """The seconds a `long` test says it takes on the CI machine; 0 for every other test."""
    mark = item.get_closest_marker("long")
    return float(mark.args[0]) if mark else 0.0


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture built once per module (per worker, under `-n N`)."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)   # before xdist's own, which reads xdist_group marks into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=long_seconds, reverse=True)      # stable: the others keep their collected order
    for item in items:
        path = Path(str(item.fspath)).resolve()
        folders = set(path.relative_to(TESTS).parts[:-1]) if path.is_relative_to(TESTS) else set()
        if folders & RAY_FOLDERS:
            item.add_marker(pytest.mark.ray)
        if item.get_closest_marker("ray"):      # tests/ray, and a test elsewhere that marks itself `ray`
            # One local Ray at a time: under `pytest -n N` (--dist loadgroup) these share one worker.
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif item.get_closest_marker("jaxmarl"):
            item.add_marker(pytest.mark.xdist_group("jaxmarl"))
        elif shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(str(path)))
        if folders & SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def tiny() -> dict[str, Any]:
    """A fresh copy of the tiny training settings (tests.helpers.TINY), to update per test."""
    return dict(TINY)


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 300-column terminal for rich, so the CLI's tables keep one line per row in captured output."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture
def own_ray():
    """Each test starts from no Ray in this process and leaves none behind."""
    import ray
    assert not ray.is_initialized()
    yield
    if ray.is_initialized():
        ray.shutdown()
