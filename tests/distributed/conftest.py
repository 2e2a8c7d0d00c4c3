"""One local Ray per test module (started once, shut down after its tests)."""

from __future__ import annotations

import signal

import pytest


def pytest_collection_modifyitems(config, items):
    """Every Ray test in one pytest-xdist worker (``--dist loadgroup``): one
    local Ray at a time on the machine, never two competing for its cores.
    They are ``slow`` (Ray's start-up alone takes seconds per module): CI runs
    them in its second step, ``python -m pytest -n 2 -m slow``."""
    for item in items:
        if "tests/distributed/" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("ray"))
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def local_ray():
    """``ray.init(num_cpus=2)`` for the module's tests; RaySamplers join it."""
    ray = pytest.importorskip("ray")
    from parllel.distributed.ray_runtime import start_local_ray

    # a Ray of its own, even while another runs on the machine (another test
    # run); the test process keeps its signal handlers (later tests need them)
    start_local_ray(num_cpus=2, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True, scope="module")
def signal_handlers_survive_the_module():
    """Ray must not leave its signal handlers in the test process: the tests
    run after these in the same worker (the runners' SIGTERM tests) need the
    process's own."""
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    yield
    after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    for sig, handler in zip((signal.SIGINT, signal.SIGTERM), before):
        signal.signal(sig, handler)
    assert after == before, f"SIGINT/SIGTERM handlers changed: {before} -> {after}"
