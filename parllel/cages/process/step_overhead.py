"""What a process cage's step costs beyond the env step, measured on this machine.

- :func:`measure_sync_seconds` times a bare synchronization round trip with
  another process (two semaphores, as a ProcessCage step uses).
- :func:`measure_step_overhead_seconds` times a real :class:`ProcessCage`
  step of one do-nothing env in a worker against a :class:`SerialCage` step
  of the same env: the difference is what handing a step to a worker costs
  (dispatch, the slots, waking the worker and waiting for its answer).

:func:`~parllel.cages.building.suggest_layout_for` weighs it against the env steps a
worker takes off the main process.
"""

from __future__ import annotations

import statistics
import time
from multiprocessing.synchronize import Semaphore
from typing import Any

import gymnasium as gym
import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.cages.cage import Cage
from parllel.cages.child_processes import ParentGone, parent_check, start_context
from parllel.cages.layout.process_layout import ProcessLayout
from parllel.cages.main_guard import check_main_guard
from parllel.cages.options import CageOptions
from parllel.cages.process.cage import ProcessCage
from parllel.cages.process.channel import wait_for
from parllel.cages.serial import SerialCage
from parllel.errors import ConfigError

__all__ = ["IdleEnv", "measure_step_overhead_seconds", "measure_sync_seconds"]


class IdleEnv(gym.Env):
    """An env whose steps cost nothing: one float observation, two actions,
    episodes of 100 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self._observation = np.zeros(1, np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self._t = 0
        return self._observation, {}

    def step(self, action: Any) -> Any:
        self._t += 1
        return self._observation, 0.0, False, self._t >= 100, {}


def _median_step_seconds(cage: Cage, steps: int) -> float:
    """Median seconds of ``cage.step_async`` + ``await_step`` (slots in
    shared memory, as a process cage's workers need)."""
    leaves = {
        fields.OBSERVATION: Array((2, 1), (1,), np.float32, storage="shared"),
        fields.REWARD: Array((1,), (), np.float32, storage="shared"),
        fields.TERMINATED: Array((1,), (), np.bool_, storage="shared"),
        fields.TRUNCATED: Array((1,), (), np.bool_, storage="shared"),
        fields.ACTION: Array((1,), (), np.int64, storage="shared"),
    }
    try:
        slots = {key: leaves[key][:] for key in leaves if key != fields.ACTION}
        slots[fields.OBSERVATION] = leaves[fields.OBSERVATION][1]
        action = leaves[fields.ACTION][:]
        cage.reset(leaves[fields.OBSERVATION][0])
        seconds = []
        for step in range(steps + steps // 4):  # the first quarter warms up
            start = time.perf_counter()
            cage.step_async(action, slots)
            cage.await_step()
            if step >= steps // 4:
                seconds.append(time.perf_counter() - start)
        return float(np.median(seconds))
    finally:
        for leaf in leaves.values():
            leaf.close()


def _echo(ping: Semaphore, pong: Semaphore, rounds: int, spin_seconds: float) -> None:
    """The helper process of :func:`measure_sync_seconds`: answer every ping."""
    check_parent = parent_check()
    try:
        for _ in range(rounds):
            wait_for(ping, spin_seconds, check_parent)
            pong.release()
    except ParentGone:
        pass


def measure_sync_seconds(
    rounds: int = 100,
    start_method: str | None = None,
    spin_seconds: float = 0.002,
    timeout: float = 30.0,
) -> float:
    """Median seconds of one synchronization round trip with another process.

    Starts one helper process (the cost of starting a worker), then the main
    process releases a semaphore and waits (:func:`wait_for`) for the helper
    to release another one, ``rounds`` times, as a ProcessCage step does
    with envs that cost nothing. Both sides poll for up to ``spin_seconds``
    before blocking, as idle workers do while every process has a core.

    Raises:
        ConfigError: called from unguarded top-level code of the main script
            with a start method that re-runs it (see ProcessCage).
        TimeoutError: the helper did not answer within ``timeout`` seconds.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    ctx = start_context(start_method)
    check_main_guard(ctx.get_start_method())  # the helper would re-run the script
    ping, pong = ctx.Semaphore(0), ctx.Semaphore(0)
    helper = ctx.Process(
        target=_echo,
        args=(ping, pong, rounds + 1, spin_seconds),
        name="parllel-sync-probe",
        daemon=True,
    )
    deadline = time.monotonic() + timeout

    def check_helper() -> None:
        if helper.exitcode is not None or time.monotonic() > deadline:
            raise TimeoutError("the sync-probe process did not answer")

    helper.start()
    try:
        ping.release()  # first round: waits for the helper to start, not timed
        wait_for(pong, 0.0, check_helper)
        seconds = []
        for _ in range(rounds):
            start = time.perf_counter()
            ping.release()
            wait_for(pong, spin_seconds, check_helper)
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds)
    finally:
        helper.join(1.0)
        if helper.exitcode is None:
            helper.kill()
            helper.join(1.0)
        helper.close()


def measure_step_overhead_seconds(
    steps: int = 2000, start_method: str | None = None
) -> float:
    """Median seconds a vector step with one worker costs beyond stepping
    the same env in this process (never negative).

    Starts one worker process (the cost of starting a process cage) and
    closes it before returning.

    Raises:
        ConfigError: ``steps`` < 1, or called from unguarded top-level code
            of the main script with a start method that re-runs it (see
            :class:`ProcessCage`).
    """
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
    serial = SerialCage(IdleEnv, 1, options=CageOptions(seed=0))
    try:
        local = _median_step_seconds(serial, steps)
    finally:
        serial.close()
    process = ProcessCage(
        IdleEnv,
        1,
        layout=ProcessLayout(n_workers=1),
        options=CageOptions(seed=0),
        start_method=start_method,
    )
    try:
        remote = _median_step_seconds(process, steps)
    finally:
        process.close()
    return max(0.0, remote - local)
