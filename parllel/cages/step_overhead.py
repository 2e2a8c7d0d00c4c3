"""What a synchronized vector step with a worker costs beyond stepping the envs.

:func:`measure_step_overhead_seconds` times a real :class:`ProcessCage` step
of one do-nothing env in a worker against a :class:`SerialCage` step of the
same env: the difference is what handing a step to a worker costs (dispatch,
the slots, waking the worker and waiting for its answer), the cost
:func:`~parllel.cages.layout.suggest_layout` weighs against the env steps a
worker takes off the main process.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

from parllel import fields
from parllel.arrays import Array
from parllel.cages.cage import Cage
from parllel.cages.process import ProcessCage
from parllel.cages.serial import SerialCage
from parllel.errors import ConfigError


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
    serial = SerialCage(IdleEnv, 1, seed=0)
    try:
        local = _median_step_seconds(serial, steps)
    finally:
        serial.close()
    process = ProcessCage(
        IdleEnv,
        1,
        seed=0,
        n_workers=1,
        main_process_envs=0,
        start_method=start_method,
    )
    try:
        remote = _median_step_seconds(process, steps)
    finally:
        process.close()
    return max(0.0, remote - local)
