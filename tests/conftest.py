"""Shared fixtures: every test must leave no parllel shared-memory segment behind."""

from __future__ import annotations

import gc
import os

import pytest

from parllel.arrays import list_segments


@pytest.fixture(autouse=True)
def no_leaked_segments():
    """Fail a test that leaves a segment of this process in /dev/shm."""
    before = set(list_segments(os.getpid()))
    yield
    gc.collect()
    leaked = sorted(set(list_segments(os.getpid())) - before)
    assert not leaked, f"shared-memory segments leaked by this test: {leaked}"
