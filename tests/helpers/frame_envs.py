"""Small envs of random uint8 frames, for the one-frame-per-step replay tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation
from hypothesis import strategies as st

from parllel import fields


class FrameEnv(gym.Env):
    """Random ``uint8`` frames; episodes end after scripted lengths.

    ``lengths`` is cycled; a negative length ends the episode by truncation,
    a positive one by termination. The reward is the step count so far.
    """

    def __init__(self, lengths: tuple[int, ...] = (5, -3), shape=(2, 3)) -> None:
        self.observation_space = gym.spaces.Box(0, 255, tuple(shape), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.lengths = tuple(lengths)
        self._episode = -1
        self._t = 0

    def _frame(self) -> np.ndarray:
        return self.np_random.integers(0, 256, self.observation_space.shape, np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._episode += 1
        self._t = 0
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        length = self.lengths[self._episode % len(self.lengths)]
        done = self._t >= abs(length)
        return (
            self._frame(),
            float(self._t),
            done and length > 0,
            done and length < 0,
            {},
        )


def make_stacked(
    k: int, lengths: tuple[int, ...] = (5, -3), padding_type: str = "reset"
) -> gym.Env:
    """``FrameStackObservation(FrameEnv(lengths), k)``."""
    return FrameStackObservation(FrameEnv(lengths), k, padding_type=padding_type)


def episode_lengths(longest: int) -> st.SearchStrategy[tuple[int, ...]]:
    """``lengths`` of :class:`FrameEnv`: 1 to 3 episodes of 1 to ``longest``
    steps, each ending by termination (positive) or truncation (negative)."""
    signed = st.integers(1, longest).flatmap(lambda n: st.sampled_from([n, -n]))
    return st.lists(signed, min_size=1, max_size=3).map(tuple)


def step_example(observation: np.ndarray) -> dict[str, Any]:
    """The env's part of a sample tree example (``sample_tree_from_examples``)
    for ``observation``s and integer actions, no env info."""
    return {
        fields.OBSERVATION: observation,
        fields.ACTION: np.int64(0),
        fields.REWARD: np.float32(0),
        fields.TERMINATED: False,
        fields.TRUNCATED: False,
        fields.ENV_INFO: {},
    }
