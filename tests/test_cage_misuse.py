"""Misuse gets a clear error: probe crashes, unpicklable factories, closed or local buffers."""

from __future__ import annotations

import threading
from functools import partial

import pytest

from parllel.cages import ProcessCage, SerialCage
from parllel.errors import ConfigError, EnvError
from parllel.patterns import build_cages
from tests.cage_helpers import run
from tests.envs import CountingEnv


def _factory_holding_a_lock():
    lock = threading.Lock()  # cloudpickle cannot serialize a lock

    def make_env():
        with lock:
            return CountingEnv()

    return make_env


def test_serial_cage_takes_an_unpicklable_factory():
    with SerialCage(_factory_holding_a_lock(), 2, seed=0) as cage:
        _, trajs = run(cage, 12)
    assert trajs


def test_process_cage_refuses_an_unpicklable_factory():
    with pytest.raises(ConfigError, match="make_env.*cannot be pickled"):
        ProcessCage(_factory_holding_a_lock(), 2, start_method="fork")


class _BrokenEnv(CountingEnv):
    def __init__(self, broken_in: str) -> None:
        if broken_in == "construction":
            raise RuntimeError("no licence server")
        super().__init__(fail_at_step=3 if broken_in == "step" else None)
        self.broken_in = broken_in

    def reset(self, *, seed=None, options=None):
        if self.broken_in == "reset":
            raise RuntimeError("reset failed on purpose")
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("parallel", ["process", "auto"])
@pytest.mark.parametrize("broken_in", ["construction", "reset", "step"])
def test_env_crash_in_the_build_cages_probe_is_an_env_error(parallel, broken_in):
    factory = partial(_BrokenEnv, broken_in)
    with pytest.raises(
        EnvError, match=f"probe env.*RuntimeError in (its )?{broken_in}"
    ) as info:
        build_cages(factory, 4, parallel=parallel, seed=0, start_method="fork")
    assert "RuntimeError" in info.value.worker_traceback
    assert isinstance(info.value.__cause__, RuntimeError)
