"""Shared fixtures: every test must leave no parllel shared-memory segment behind."""

from __future__ import annotations

import gc
import os
import signal
import tempfile
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments

# the JAX examples' compilation cache (parllel.jax.compilation_cache), for the
# examples these tests run and the processes they start: a temporary
# directory, never the user's ~/.cache
os.environ.setdefault(
    "PARLLEL_JAX_CACHE_DIR",
    str(Path(tempfile.gettempdir()) / "parllel-tests-jax-cache"),
)

# two CPU devices for JAX, as on a 2-core machine where the examples ask for
# one per core: the seed-axis tests run with the runs split over both
# (parllel.jax.cpu_backend), the single-run tests on the first
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "2")


def pytest_configure(config: pytest.Config) -> None:
    """Give the test process the default Ctrl-C handling.

    A run started as a background job (``nohup python -m pytest &`` in a script)
    starts with SIGINT ignored, and every process a test starts would inherit
    that; the Ctrl-C tests (in this process and in the scripts they start)
    need Python's default, as in a terminal.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def no_leaked_segments():
    """Fail a test that leaves a segment of this process in /dev/shm.

    A segment that only garbage holds (an Array in a reference cycle) is no
    leak: when a new segment is there, the garbage is collected and the
    segments are listed again. Only then: a full collection takes 0.2 to 0.4 s
    in a process that imported torch, minutes over the whole suite.
    """
    before = set(list_segments(os.getpid()))
    yield
    if set(list_segments(os.getpid())) - before:
        gc.collect()
    leaked = sorted(set(list_segments(os.getpid())) - before)
    assert not leaked, f"shared-memory segments leaked by this test: {leaked}"
