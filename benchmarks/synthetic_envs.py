"""Synthetic gymnasium envs with a controlled cost per step (for benchmarks)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np


def _calibrate(seconds: float) -> int:
    """Iterations of the busy loop that take about ``seconds`` on this machine."""
    n = 1000
    while True:
        start = time.perf_counter()
        _busy(n)
        elapsed = time.perf_counter() - start
        if elapsed > 0.02:
            return max(1, int(n * seconds / elapsed))
        n *= 2


def _busy(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i * i % 7
    return acc


_ITERATIONS: dict[float, int] = {}


def busy_iterations(seconds: float) -> int:
    """Cached calibration of :func:`_busy` for ``seconds`` of CPU work."""
    if seconds not in _ITERATIONS:
        _ITERATIONS[seconds] = _calibrate(seconds)
    return _ITERATIONS[seconds]


class CpuBoundEnv(gym.Env):
    """Box(4) observations, Discrete(2) actions; burns ``step_seconds`` of CPU per step.

    Episodes last ``episode_length`` steps (then ``truncated``).
    """

    def __init__(
        self,
        step_seconds: float = 200e-6,
        episode_length: int = 200,
        iterations: int | None = None,
    ) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.episode_length = episode_length
        self.iterations = iterations or busy_iterations(step_seconds)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action):
        _busy(self.iterations)
        self._t += 1
        observation = np.full(4, (self._t % 100) / 100.0, np.float32)
        return observation, float(action), False, self._t >= self.episode_length, {}


class Atari84Env(gym.Env):
    """84x84x4 uint8 observations, Discrete(6) actions, ~``step_seconds`` per step."""

    def __init__(
        self,
        step_seconds: float = 100e-6,
        episode_length: int = 500,
        iterations: int | None = None,
    ) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.episode_length = episode_length
        self.iterations = iterations or busy_iterations(step_seconds)
        self._frame = np.zeros((84, 84, 4), np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._frame[:] = self.np_random.integers(0, 255)
        return self._frame.copy(), {}

    def step(self, action):
        _busy(self.iterations)
        self._t += 1
        self._frame[..., self._t % 4] = (self._t + int(action)) % 256
        return self._frame.copy(), 1.0, False, self._t >= self.episode_length, {}


class NoopEnv(gym.Env):
    """Does nothing at all: stepping it measures pure synchronization cost."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._observation = np.zeros(4, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observation, {}

    def step(self, action):
        return self._observation, 0.0, False, False, {}


class FloatImageEnv(gym.Env):
    """64x64x3 float32 observations, Discrete(2) actions; stepping costs a copy only.

    The largest float observations a sampler check has to read per step, with
    nothing else to hide its cost behind.
    """

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (64, 64, 3), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._frame = np.zeros((64, 64, 3), np.float32)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._frame[:] = self.np_random.random()
        return self._frame, {}

    def step(self, action):
        self._t += 1
        self._frame[self._t % 64] = (self._t % 100) / 100.0
        return self._frame, float(action), False, self._t >= 500, {}
