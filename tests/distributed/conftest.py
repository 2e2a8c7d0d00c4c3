"""One local Ray per test module (started once, shut down after its tests)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    """Every Ray test in one pytest-xdist worker (``--dist loadgroup``): one
    local Ray at a time on the machine, never two competing for its cores."""
    for item in items:
        if "tests/distributed/" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="module")
def local_ray():
    """``ray.init(num_cpus=2)`` for the module's tests; RaySamplers join it."""
    ray = pytest.importorskip("ray")
    from parllel.distributed.ray_runtime import init_ray

    # a Ray of its own, even while another runs on the machine (another test
    # run); the test process keeps its signal handlers (later tests need them)
    init_ray(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
