"""Misuse gets a clear error: probe crashes, unpicklable factories, closed or local buffers."""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.arrays import Array
from parllel.builders import build_sample_tree
from parllel.cages import (
    CageOptions,
    ProcessCage,
    ProcessLayout,
    SerialCage,
    build_cage,
)
from parllel.cages.cage import CageState
from parllel.errors import (
    ArrayClosedError,
    ConfigError,
    EnvError,
    ParllelWarning,
)
from parllel.samplers import FeedForwardSampler
from tests.helpers.cage_helpers import allocate, run, slots
from tests.helpers.envs import CountingEnv


def _factory_holding_a_lock():
    lock = threading.Lock()  # cloudpickle cannot serialize a lock

    def make_env():
        with lock:
            return CountingEnv()

    return make_env


def test_serial_cage_takes_an_unpicklable_factory():
    with SerialCage(_factory_holding_a_lock(), 2, options=CageOptions(seed=0)) as cage:
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
@pytest.mark.parametrize("broken_in", ["construction", "reset"])
def test_env_crash_in_the_build_cage_timing_falls_back_then_the_cage_raises(
    parallel, broken_in
):
    """The layout timing cannot step the env: a warning and a default layout
    (serial for "auto"); the cage's own envs then raise the env's error."""
    factory = partial(_BrokenEnv, broken_in)
    with (
        pytest.warns(ParllelWarning, match="could not time the envs"),
        pytest.raises(EnvError, match="raised RuntimeError in its") as info,
    ):
        build_cage(
            factory,
            4,
            parallel=parallel,
            options=CageOptions(seed=0),
            start_method="fork",
        )
    assert "RuntimeError" in info.value.worker_traceback


@pytest.mark.parametrize("parallel", ["process", "auto"])
def test_an_env_that_fails_later_than_the_example_step_still_builds(parallel):
    factory = partial(_BrokenEnv, "step")  # fails at its third step
    with pytest.warns(ParllelWarning, match="could not time the envs"):
        cage = build_cage(
            factory, 4, parallel=parallel, options=CageOptions(seed=0),
            start_method="fork",
        )  # fmt: skip
    with cage:
        assert isinstance(cage, ProcessCage) == (parallel == "process")


# -- closed buffers -------------------------------------------------------------
CAGE_KINDS = {
    "serial": SerialCage,
    "process": partial(
        ProcessCage, start_method="fork", layout=ProcessLayout(main_process_envs=1)
    ),
}


@pytest.mark.parametrize("kind", list(CAGE_KINDS))
def test_a_cage_refuses_to_write_into_a_closed_tree(kind):
    with CAGE_KINDS[kind](CountingEnv, 3, options=CageOptions(seed=0)) as cage:
        tree = allocate(cage, 4)
        cage.reset(tree.observation[0])
        cage.step(tree.action[0], slots(tree, 0))
        tree.close()
        with pytest.raises(ArrayClosedError, match="slot '(action|observation)'"):
            cage.step(tree.action[1], slots(tree, 1))
        cage_state = cage.state
        with pytest.raises(ArrayClosedError, match="'observation'"):
            cage.reset(tree.observation[0])
    assert cage_state is CageState.IDLE


def test_views_taken_before_close_are_refused_by_a_process_cage():
    with ProcessCage(
        CountingEnv, 2, start_method="fork", options=CageOptions(seed=0)
    ) as cage:
        tree = allocate(cage, 2)
        observation = tree.observation[0]  # a writable view, not used yet
        tree.close()
        with pytest.raises(ArrayClosedError, match="slot 'observation'.*released"):
            cage.reset(observation)


def _sampler_parts(cage, storage=None):
    handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), cage.n_envs)
    return handler, build_sample_tree(cage, handler, batch_T=4, storage=storage)


@pytest.mark.parametrize("kind", list(CAGE_KINDS))
def test_a_sampler_refuses_a_closed_tree(kind):
    with CAGE_KINDS[kind](CountingEnv, 3, options=CageOptions(seed=0)) as cage:
        handler, tree = _sampler_parts(cage, storage="shared")
        sampler = FeedForwardSampler(cage, handler, tree)
        sampler.collect_batch()
        tree.close()
        with pytest.raises(ArrayClosedError, match="rotate leaf"):
            sampler.collect_batch()
        with pytest.raises(ArrayClosedError, match="hand sample-tree leaf"):
            FeedForwardSampler(cage, handler, tree)


# -- local leaves in a process cage's tree ------------------------------------------
def test_a_local_leaf_is_named_when_the_tree_is_handed_to_the_sampler():
    with ProcessCage(
        CountingEnv, 2, start_method="fork", options=CageOptions(seed=0)
    ) as cage:
        handler, tree = _sampler_parts(cage)
        with tree:
            tree[fields.ENV_INFO]["extra"] = Array((4, 2), (), np.float32)
            with pytest.raises(ConfigError, match="leaf 'env_info.extra'"):
                FeedForwardSampler(cage, handler, tree)
            with pytest.raises(ConfigError, match="slot 'env_info.extra'"):
                cage.reset(tree.observation[0])
                cage.step(
                    tree.action[0],
                    {
                        fields.OBSERVATION: tree.observation[1],
                        fields.REWARD: tree.reward[0],
                        fields.TERMINATED: tree.terminated[0],
                        fields.TRUNCATED: tree.truncated[0],
                        fields.ENV_INFO: tree.env_info[0],
                    },
                )
            assert cage.state is CageState.IDLE


def test_a_local_tree_is_fine_for_a_serial_cage():
    with SerialCage(CountingEnv, 2, options=CageOptions(seed=0)) as cage:
        handler, tree = _sampler_parts(cage)
        tree[fields.ENV_INFO]["extra"] = Array((4, 2), (), np.float32)
        FeedForwardSampler(cage, handler, tree).collect_batch()


# -- an env's own exception from a worker process ----------------------------------
class _EnvFailure(Exception):
    """An env's own exception class (picklable by reference)."""


class _Unpicklable(Exception):
    """An exception holding a lock: it cannot be pickled back."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


class _RaisingEnv(CountingEnv):
    def __init__(self, error: type[Exception]) -> None:
        super().__init__()
        self.error = error

    def step(self, action):
        raise self.error("stepped into a wall")


@pytest.mark.parametrize("error", [_EnvFailure, _Unpicklable])
def test_a_worker_error_carries_the_envs_own_exception_when_it_pickles(error):
    # the probe step at construction runs in the worker
    with pytest.raises(EnvError, match="stepped into a wall") as info:
        ProcessCage(
            partial(_RaisingEnv, error),
            2,
            options=CageOptions(seed=0),
            start_method="fork",
        )
    cause = info.value.__cause__
    if error is _EnvFailure:
        assert type(cause) is _EnvFailure and str(cause) == "stepped into a wall"
    else:  # the message says why it is not attached
        assert cause is None
        assert "_Unpicklable cannot be sent to the main process" in str(info.value)
