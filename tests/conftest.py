"""Fixtures shared by several test files, and the markers of the fast run.

`ray`: tests that start a local Ray (the files in RAY_FILES); `slow`: the fault suite (tests/faults)
and the tests that train or evaluate for seconds (SLOW_FILES, measured with `--durations`). The fast
run, `python -m pytest -m "not slow and not ray"`, stays under a minute; the README's test command
runs everything.
"""
from __future__ import annotations

from pathlib import Path

import pytest

RAY_FILES = {"test_ray_backend.py", "test_ray_faults.py", "test_ray_netcost.py", "test_rllib_interop.py",
             "test_bench_rllib.py"}
SLOW_FILES = {"test_engine.py", "test_engine_bookkeeping.py", "test_budget.py", "test_value_norm.py",
              "test_learning_spread.py", "test_run_commit.py", "test_cli.py", "test_user_project.py",
              "test_check_all.py", "test_runtime.py", "test_export.py", "test_plot.py", "test_diagnose.py",
              "test_evidence.py", "test_evidence_drift.py", "test_vmas.py", "test_target_kl.py",
              "test_bench_learner.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = Path(str(item.fspath)).name
        if name in RAY_FILES:
            item.add_marker(pytest.mark.ray)
        if name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def own_ray():
    """Each test starts from no Ray in this process and leaves none behind."""
    import ray
    assert not ray.is_initialized()
    yield
    if ray.is_initialized():
        ray.shutdown()
