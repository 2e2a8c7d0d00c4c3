"""CallLogEnv: an env that logs every call it gets, to check what probes touch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class CallLogEnv(gym.Env):
    """Logs its construction, resets (with their seed), steps and close in ``calls``.

    Like gymnasium's autoreset tests, its step needs ``max_count``, an
    attribute set with ``set_attr`` after construction: an episode ends when
    the count reaches it. Observation: the count; reward: the action; info:
    ``{"count": count}``.
    """

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 1000, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.calls: list = ["init"]
        self.count = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.calls.append(("reset", seed))
        self.count = 0
        return np.array([self.count], np.float32), {}

    def step(self, action):
        self.calls.append(("step", int(action)))
        self.count += 1
        done = self.count >= self.max_count  # set_attr'ed, not built
        observation = np.array([self.count], np.float32)
        return observation, float(action), done, False, {"count": self.count}

    def close(self) -> None:
        self.calls.append("close")


class BuiltLog:
    """A factory of CallLogEnvs that keeps every env it built (this process's).

    ``max_count``: set on every env it builds (None: left to ``set_attr``).
    """

    def __init__(self, max_count: int | None = None) -> None:
        self.built: list[CallLogEnv] = []
        self.max_count = max_count

    def __call__(self) -> CallLogEnv:
        env = CallLogEnv()
        if self.max_count is not None:
            env.max_count = self.max_count
        self.built.append(env)
        return env
