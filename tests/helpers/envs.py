"""Deterministic test envs whose observations say exactly where they are.

``CountingEnv`` observations encode (env seed tag, episode number, time step,
previous action); rewards encode the action, so tests can check alignment of
every buffer field across episode and batch boundaries.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Box(4) obs ``[tag, episode, t, last_action]``; Discrete or Box actions.

    Episodes last a length drawn from ``[min_length, max_length]`` by the
    env's seeded RNG at each reset; at the end the episode terminates if
    ``terminal`` else truncates. Reward = action (sum for Box) + 0.01 * t.
    Info holds ``{"t": t, "ale.lives": 3 - episode % 3, "note": "text"}``.
    """

    def __init__(
        self,
        min_length: int = 3,
        max_length: int = 7,
        terminal: bool = True,
        action: str = "discrete",
        observation: str = "box",
        fail_at_step: int | None = None,
        die_at_step: int | None = None,
    ) -> None:
        self.min_length, self.max_length, self.terminal = (
            min_length,
            max_length,
            terminal,
        )
        self.fail_at_step = fail_at_step
        self.die_at_step = die_at_step
        self.box_obs = gym.spaces.Box(-1e6, 1e6, (4,), np.float32)
        if observation == "dict":
            self.observation_space = gym.spaces.Dict(
                {"state": self.box_obs, "count": gym.spaces.Discrete(1000)}
            )
        else:
            self.observation_space = self.box_obs
        self.kind = observation
        if action == "box":
            self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        elif action == "dict":
            self.action_space = gym.spaces.Dict(
                {
                    "move": gym.spaces.Discrete(3),
                    "force": gym.spaces.Box(-1, 1, (1,), np.float32),
                }
            )
        else:
            self.action_space = gym.spaces.Discrete(5)
        self.tag = -1.0
        self.episode = -1
        self.t = 0
        self.total_steps = 0
        self.length = 0

    def _observation(self, last_action: float):
        state = np.array([self.tag, self.episode, self.t, last_action], np.float32)
        if self.kind == "dict":
            return {"state": state, "count": np.int64(self.total_steps % 1000)}
        return state

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.tag = float(seed % 1000)
        self.episode += 1
        self.t = 0
        self.length = int(self.np_random.integers(self.min_length, self.max_length + 1))
        return self._observation(0.0), {"t": 0}

    def _action_value(self, action) -> float:
        if isinstance(action, dict):
            return float(action["move"]) + float(np.sum(action["force"]))
        return float(np.sum(action))

    def step(self, action):
        self.total_steps += 1
        if self.fail_at_step is not None and self.total_steps >= self.fail_at_step:
            raise RuntimeError(f"env failed on purpose at step {self.total_steps}")
        if self.die_at_step is not None and self.total_steps >= self.die_at_step:
            os._exit(17)
        value = self._action_value(action)
        self.t += 1
        done = self.t >= self.length
        info = {"t": self.t, "ale.lives": 3 - self.episode % 3, "note": "text"}
        reward = value + 0.01 * self.t
        return (
            self._observation(value),
            reward,
            done and self.terminal,
            done and not self.terminal,
            info,
        )

    def render(self):
        """A tiny RGB frame whose pixels hold the time step."""
        return np.full((2, 2, 3), self.t, np.uint8)
