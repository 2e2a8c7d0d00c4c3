"""Env factories for the throughput tool's tests (``python -m parllel.bench``).

``NoopEnv`` costs next to nothing per step; ``BusyEnv`` burns a fixed amount
of CPU time per step (measured with ``time.thread_time``, so it costs the same
CPU whatever else runs on the machine). The others fail in chosen ways.
"""

from __future__ import annotations

import multiprocessing
import time

import gymnasium as gym
import numpy as np
from gymnasium.utils import EzPickle

WAIT_SECONDS = 0.002  # seconds WaitingEnv waits per step


class NoopEnv(gym.Env):
    """Box(2) observations, Discrete(2) actions; a step does nothing; never ends."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


class WaitingEnv(NoopEnv):
    """NoopEnv whose step waits ``WAIT_SECONDS`` (as an env waiting on a
    simulator or a device would): processes step such envs side by side
    whatever else keeps the machine's cores busy."""

    def step(self, action):
        time.sleep(WAIT_SECONDS)
        return super().step(action)


class FailingStepEnv(NoopEnv):
    """Raises in ``step`` once it has stepped ``fail_after`` times."""

    fail_after = 20

    def __init__(self) -> None:
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps > self.fail_after:
            raise RuntimeError("FailingStepEnv broke on purpose")
        return super().step(action)


class InterruptedEnv(NoopEnv):
    """Raises KeyboardInterrupt (as Ctrl-C would) in ``step`` once it has stepped
    ``interrupt_after`` times, only in the main process (not in workers)."""

    interrupt_after = 250  # beyond suggest_layout_for's 200 probe steps

    def __init__(self) -> None:
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if (
            self.steps > self.interrupt_after
            and multiprocessing.parent_process() is None
        ):
            raise KeyboardInterrupt
        return super().step(action)


class Float64NoopEnv(NoopEnv):
    """NoopEnv with float64 observations, as MuJoCo's envs return."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float64), {}

    def step(self, action):
        return np.zeros(2, np.float64), 0.0, False, False, {}


class NoMlpEnv(NoopEnv):
    """NoopEnv with MultiBinary actions: random actions work, the ``mlp``
    policy cannot be built (every layout raises in the mlp pass)."""

    action_space = gym.spaces.MultiBinary(2)


class EzPickleNoopEnv(NoopEnv, EzPickle):
    """NoopEnv that pickles by re-construction, as MuJoCo's envs do: its envs
    cannot move between processes, so load balancing is refused."""

    def __init__(self) -> None:
        EzPickle.__init__(self)


def make_noop_env() -> NoopEnv:
    """A NoopEnv."""
    return NoopEnv()


def make_waiting_env() -> WaitingEnv:
    """A WaitingEnv."""
    return WaitingEnv()


def broken_factory() -> gym.Env:
    """A factory that raises."""
    raise ValueError("no such level: 'castle-9'")


def not_an_env() -> object:
    """A factory returning something that is not an env."""
    return {"observation_space": None}


NOT_CALLABLE = 42
