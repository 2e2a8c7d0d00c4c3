"""Test envs over arbitrary spaces, info dicts and declared-vs-actual mismatches."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym


class SpaceEnv(gym.Env):
    """Observations sampled from any observation space by the env's seeded RNG.

    Episodes last ``[min_length, max_length]`` steps (drawn at each reset).
    The action must be in the action space (else ``ValueError``); the reward
    is a seeded random number. ``reset`` returns info ``{"episode": k}``;
    ``step`` returns ``info`` (a dict, or a callable ``(t, episode) -> dict``).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        min_length: int = 2,
        max_length: int = 5,
        info: Any = None,
    ) -> None:
        self.observation_space = copy.deepcopy(observation_space)
        self.action_space = copy.deepcopy(action_space)
        self.min_length, self.max_length = min_length, max_length
        self.info = info
        self.episode = -1
        self.t = 0
        self.length = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.episode += 1
        self.t = 0
        self.length = int(self.np_random.integers(self.min_length, self.max_length + 1))
        return self.observation_space.sample(), {"episode": self.episode}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self.t += 1
        if callable(self.info):
            info = self.info(self.t, self.episode)
        else:
            info = dict(self.info or {})
        reward = float(self.np_random.random())
        done = self.t >= self.length
        return self.observation_space.sample(), reward, done, False, info


class WrongObservationEnv(gym.Env):
    """Declares ``space`` but returns ``observation`` (to test the probe check)."""

    def __init__(self, space: gym.Space, observation: Any) -> None:
        self.observation_space = space
        self.action_space = gym.spaces.Discrete(2)
        self.observation = observation

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation, {}

    def step(self, action):
        return self.observation, 0.0, False, False, {}
