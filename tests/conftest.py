"""Fixtures shared by several test files."""
from __future__ import annotations

import pytest


@pytest.fixture
def own_ray():
    """Each test starts from no Ray in this process and leaves none behind."""
    import ray
    assert not ray.is_initialized()
    yield
    if ray.is_initialized():
        ray.shutdown()
