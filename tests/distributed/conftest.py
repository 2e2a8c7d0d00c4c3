"""One local Ray per test module (started once, shut down after its tests)."""

from __future__ import annotations

import pytest


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
