"""Test envs over arbitrary spaces, info dicts and declared-vs-actual mismatches,
and a custom space registered with parllel's space functions."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from parllel.agents.scripted import sample_actions
from parllel.cages.spaces import action_reader, space_leaves, zero_example
from parllel.tree.nodes import tree_get


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


class Interval(gym.Space):
    """A custom space: ordered pairs ``(a, b)``, ``low <= a <= b <= high`` (float32).

    Not a ``Tuple``: parllel handles it through the registrations below, made
    in the module that defines the space so that worker processes (which
    import this module to unpickle the env factory) have them too.
    """

    def __init__(self, low: float, high: float, seed: int | None = None) -> None:
        super().__init__(None, None, seed)
        self.low, self.high = float(low), float(high)
        self.bound = gym.spaces.Box(self.low, self.high, (), np.float32)

    def sample(self, mask: Any = None, probability: Any = None) -> tuple:
        a, b = np.sort(self.np_random.uniform(self.low, self.high, 2))
        return np.float32(a), np.float32(b)

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, tuple)
            and len(x) == 2
            and self.low <= float(x[0]) <= float(x[1]) <= self.high
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and (other.low, other.high) == (
            self.low,
            self.high,
        )

    def __repr__(self) -> str:
        return f"Interval({self.low}, {self.high})"


@zero_example.register
def _(space: Interval) -> tuple:
    return np.float32(space.low), np.float32(space.low)


@space_leaves.register
def _(space: Interval, prefix: str = "") -> list:
    return [(f"{prefix}.{i}" if prefix else str(i), space.bound) for i in range(2)]


@action_reader.register
def _(space: Interval) -> Any:
    def read(views: Any) -> list:
        lows, highs = tree_get(views, "0"), tree_get(views, "1")
        return [(np.float32(a), np.float32(b)) for a, b in zip(lows, highs)]

    return read


@sample_actions.register
def _(space: Interval, n: int, rng: np.random.Generator) -> tuple:
    pairs = np.sort(rng.uniform(space.low, space.high, (2, n)), axis=0)
    return pairs[0].astype(np.float32), pairs[1].astype(np.float32)
