"""A hung env: step_timeout raises StepTimeoutError with the worker's stack, leaving nothing behind."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from functools import partial

import pytest

from parllel.cages import CageOptions, ProcessCage, ProcessLayout
from parllel.errors import (
    ClosedCageError,
    ConfigError,
    StepTimeoutError,
    WorkerDiedError,
)
from tests.helpers.cage_helpers import allocate, slots
from tests.helpers.envs import CountingEnv

# The hangs below never end, so the outcome does not depend on this value.
TIMEOUT = 0.5


def hang_forever_in_the_env() -> None:
    """Block for good without burning a CPU, as a deadlocked env would."""
    threading.Event().wait()


class HangingEnv(CountingEnv):
    """CountingEnv whose ``hang_in`` ("step" or "reset") never returns from its
    ``hang_at``-th call on (steps counted per episode), in worker ``hang_worker`` (None: in every worker;
    never in the main process)."""

    def __init__(self, hang_in: str, hang_at: int, hang_worker: int | None) -> None:
        super().__init__(min_length=100, max_length=100)
        name = mp.current_process().name
        in_worker = name.startswith("parllel-worker-")
        chosen = hang_worker is None or name == f"parllel-worker-{hang_worker}"
        self.hang_in = hang_in if in_worker and chosen else "never"
        self.hang_at = hang_at
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        if self.hang_in == "reset" and self.resets >= self.hang_at:
            hang_forever_in_the_env()
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.hang_in == "step" and self.t + 1 >= self.hang_at:
            hang_forever_in_the_env()
        return super().step(action)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def _reset_and_step(cage, tree, steps: int) -> None:
    cage.reset(tree.observation[0])
    for t in range(steps):
        cage.step(tree.action[t], slots(tree, t))


def _assert_cleaned_up(cage, pids) -> None:
    assert cage.closed
    assert all(_gone(pid) for pid in pids)


def test_a_hung_step_names_the_worker_and_shows_its_stack():
    factory = partial(HangingEnv, "step", 3, 1)
    cage = ProcessCage(
        factory,
        4,
        layout=ProcessLayout(envs_per_worker=2),
        options=CageOptions(seed=0),
        start_method="fork",
        step_timeout=TIMEOUT,
    )
    pids = cage.worker_pids
    with allocate(cage, 8) as tree:
        with pytest.raises(StepTimeoutError) as info:
            _reset_and_step(cage, tree, 8)
        error = info.value
        assert (error.worker_index, error.env_indices) == (1, (2, 3))
        assert error.timeout == TIMEOUT
        assert "worker 1 (envs [2, 3]) did not finish a step" in str(error)
        assert "worker 0" not in str(error)
        # faulthandler's stack of the worker, down to the hanging env code
        assert "hang_forever_in_the_env" in error.worker_stack
        assert "in step" in error.worker_stack
        assert error.worker_stack in str(error)
        assert isinstance(error, TimeoutError)
        _assert_cleaned_up(cage, pids)
        with pytest.raises(ClosedCageError):
            cage.step(tree.action[0], slots(tree, 0))


def test_a_hung_reset_times_out_too_under_forkserver():
    factory = partial(HangingEnv, "reset", 1, 1)
    cage = ProcessCage(
        factory,
        3,
        layout=ProcessLayout(n_workers=2),
        options=CageOptions(seed=0),
        step_timeout=TIMEOUT,
    )
    pids = cage.worker_pids
    with allocate(cage, 2) as tree:
        with pytest.raises(StepTimeoutError, match="did not finish a reset") as info:
            cage.reset(tree.observation[0])
    assert info.value.worker_index == 1
    assert "hang_forever_in_the_env" in info.value.worker_stack
    assert "in reset" in info.value.worker_stack
    _assert_cleaned_up(cage, pids)


def test_every_late_worker_is_named_with_its_stack():
    factory = partial(HangingEnv, "step", 2, None)
    cage = ProcessCage(
        factory,
        4,
        layout=ProcessLayout(n_workers=2),
        options=CageOptions(seed=0),
        start_method="fork",
        step_timeout=TIMEOUT,
    )
    pids = cage.worker_pids
    with allocate(cage, 4) as tree:
        with pytest.raises(StepTimeoutError) as info:
            _reset_and_step(cage, tree, 4)
    message = str(info.value)
    assert "worker 0 (envs [0, 1]); worker 1 (envs [2, 3]) did not finish" in message
    assert message.count("hang_forever_in_the_env") >= 2
    _assert_cleaned_up(cage, pids)


def test_the_main_share_steps_while_a_worker_times_out():
    factory = partial(HangingEnv, "step", 2, None)  # never hangs in the main process
    cage = ProcessCage(
        factory,
        3,
        layout=ProcessLayout(main_process_envs=1, n_workers=1),
        options=CageOptions(seed=0),
        start_method="fork",
        step_timeout=TIMEOUT,
    )
    pids = cage.worker_pids
    with allocate(cage, 4) as tree:
        with pytest.raises(StepTimeoutError) as info:
            _reset_and_step(cage, tree, 4)
        assert tree.observation[1, 0, 2] == 1  # the main share's env stepped
    assert (info.value.worker_index, info.value.env_indices) == (0, (1, 2))
    _assert_cleaned_up(cage, pids)


def test_no_timeout_for_envs_that_answer():
    factory = partial(HangingEnv, "never", 1, None)
    with ProcessCage(
        factory,
        2,
        layout=ProcessLayout(n_workers=2),
        options=CageOptions(seed=0),
        start_method="fork",
        step_timeout=TIMEOUT,
    ) as cage:
        with allocate(cage, 16) as tree:
            _reset_and_step(cage, tree, 16)
            assert tree.observation[16, :, 2].tolist() == [16, 16]


@pytest.mark.parametrize("bad", [0, -1.0])
def test_step_timeout_must_be_positive(bad):
    with pytest.raises(ConfigError, match="step_timeout"):
        ProcessCage(CountingEnv, 2, start_method="fork", step_timeout=bad)


def test_default_step_timeout_is_generous_and_none_waits_forever():
    with ProcessCage(CountingEnv, 1, start_method="fork") as cage:
        assert cage.step_timeout == 300.0
    with ProcessCage(CountingEnv, 1, start_method="fork", step_timeout=None) as cage:
        assert cage.step_timeout is None


def _hangs_while_built_in_a_worker():
    if mp.current_process().name.startswith("parllel-worker-"):
        hang_forever_in_the_env()
    return CountingEnv()


def test_a_worker_stuck_building_its_envs_shows_its_stack():
    with pytest.raises(WorkerDiedError, match="start_timeout") as info:
        ProcessCage(
            _hangs_while_built_in_a_worker,
            2,
            start_method="fork",
            start_timeout=TIMEOUT,
        )
    assert "hang_forever_in_the_env" in str(info.value)
    assert "_hangs_while_built_in_a_worker" in str(info.value)
