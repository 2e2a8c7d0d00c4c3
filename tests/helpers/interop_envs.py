"""Envs and comparisons for the interop tests (gymnasium / SB3 vector envs)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CountEnv(gym.Env):
    """Observation: steps since reset (or the reset seed); reward = action.

    The episode terminates when the action is 1, truncates when it is 2.
    Reset info echoes the options; step info carries the count, a string, a
    nested dict, and a key only at the episode's end.
    """

    observation_space = gym.spaces.Discrete(1000)
    action_space = gym.spaces.Discrete(3)
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.count = 0

    def render(self) -> np.ndarray | None:
        """A 2x2 RGB image filled with the count (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array":
            return None
        return np.full((2, 2, 3), self.count % 256, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.count = seed if seed is not None else 0
        return self.count, {"options": options} if options else {}

    def step(self, action: Any):
        self.count += 1
        action = int(action)
        terminated, truncated = action == 1, action == 2
        info: dict[str, Any] = {"count": self.count, "text": f"c{self.count}"}
        info["nested"] = {"half": self.count / 2}
        if terminated or truncated:
            info["ended"] = True
        return self.count, float(action), terminated, truncated, info


class RichEnv(gym.Env):
    """Dict observations (a Box and a Discrete), seeded random dynamics.

    Episodes end after a seeded random length, terminated or truncated.
    Step infos vary in which keys they hold; numpy arrays included.
    """

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "pos": gym.spaces.Box(-10, 10, (3,), np.float32),
                "id": gym.spaces.Discrete(7),
            }
        )
        self.action_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.t = 0
        self.length = 0

    def _observation(self) -> dict[str, Any]:
        return {
            "pos": self.np_random.normal(size=3).astype(np.float32),
            "id": int(self.np_random.integers(7)),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.length = int(self.np_random.integers(2, 7))
        return self._observation(), {"length": self.length}

    def step(self, action: Any):
        self.t += 1
        reward = float(np.sum(action)) + float(self.np_random.random())
        done = self.t >= self.length
        terminated = done and self.length % 2 == 0
        truncated = done and not terminated
        info: dict[str, Any] = {"t": self.t}
        if self.t % 2:
            info["odd"] = np.array([self.t, -self.t], dtype=np.int32)
        return self._observation(), reward, terminated, truncated, info


def make_count_env() -> gym.Env:
    """A CountEnv (module-level: picklable by reference)."""
    return CountEnv()


def make_rich_env() -> gym.Env:
    """A RichEnv."""
    return RichEnv()


def make_cartpole() -> gym.Env:
    """CartPole with a short time limit (episodes truncate as well as terminate)."""
    return gym.make("CartPole-v1", max_episode_steps=12)


def imports_sb3_or_torch(env: Any) -> bool:
    """Whether the process running this has imported Stable-Baselines3 or torch."""
    import sys

    return "stable_baselines3" in sys.modules or "torch" in sys.modules


def assert_same(expected: Any, actual: Any, path: str = "", skip: tuple = ()) -> None:
    """Recursive exact equality of nested dicts / tuples / lists / arrays, dtypes included."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {type(actual)} is not a dict"
        assert set(expected) == set(actual), (
            f"{path}: keys {set(expected)} != {set(actual)}"
        )
        for key in expected:
            if key not in skip:
                assert_same(expected[key], actual[key], f"{path}[{key!r}]", skip)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) in (tuple, list), f"{path}: {type(actual)}"
        assert len(expected) == len(actual), f"{path}: length"
        for i, (a, b) in enumerate(zip(expected, actual)):
            assert_same(a, b, f"{path}[{i}]", skip)
    elif isinstance(expected, np.ndarray) and expected.dtype == object:
        assert isinstance(actual, np.ndarray) and actual.dtype == object, path
        assert expected.shape == actual.shape, path
        for i, (a, b) in enumerate(zip(expected, actual)):
            assert_same(a, b, f"{path}[{i}]", skip)
    elif isinstance(expected, np.ndarray):
        actual = np.asarray(actual)
        assert expected.dtype == actual.dtype, (
            f"{path}: {expected.dtype} != {actual.dtype}"
        )
        np.testing.assert_array_equal(expected, actual, err_msg=path)
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


class ActionEchoEnv(gym.Env):
    """Observes its last action, flattened (float32); episodes of 3 steps.

    The action space is given (e.g. a Dict or Tuple space), so a wrong action
    reaching the env shows in the observation.
    """

    def __init__(self, action_space: gym.Space) -> None:
        self.action_space = action_space
        size = gym.spaces.flatdim(action_space)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action: Any):
        assert action in self.action_space, action
        self.t += 1
        observation = gym.spaces.flatten(self.action_space, action).astype(np.float32)
        return observation, float(observation.sum()), self.t >= 3, False, {}


DICT_ACTIONS = gym.spaces.Dict(
    {"move": gym.spaces.Discrete(3), "force": gym.spaces.Box(-1, 1, (2,), np.float32)}
)
TUPLE_ACTIONS = gym.spaces.Tuple(
    (gym.spaces.Discrete(4), gym.spaces.Box(-1, 1, (3,), np.float32))
)


def make_dict_action_env() -> gym.Env:
    """An ActionEchoEnv with a Dict action space."""
    return ActionEchoEnv(DICT_ACTIONS)


def make_tuple_action_env() -> gym.Env:
    """An ActionEchoEnv with a Tuple action space."""
    return ActionEchoEnv(TUPLE_ACTIONS)


class DynamicEnv(gym.Env):
    """Observations and actions of a space without fixed shape, from its step count.

    ``kind``: ``"text"``, ``"sequence"``, ``"graph"`` or ``"oneof"``; the
    action space is the same space. Episodes last 4 steps; ``fixed_actions``
    gives it a Discrete(2) action space instead.
    """

    def __init__(self, kind: str, fixed_actions: bool = False) -> None:
        box = gym.spaces.Box(0, 10, (2,), np.float32)
        self.kind = kind
        self.observation_space = {
            "text": gym.spaces.Text(8),
            "sequence": gym.spaces.Sequence(gym.spaces.Discrete(5)),
            "graph": gym.spaces.Graph(box, gym.spaces.Discrete(3)),
            "oneof": gym.spaces.OneOf([gym.spaces.Discrete(5), box]),
        }[kind]
        self.action_space = (
            gym.spaces.Discrete(2) if fixed_actions else self.observation_space
        )
        self.t = 0

    def _observation(self) -> Any:
        t = self.t
        if self.kind == "text":
            return "ab"[: t % 3] + str(t)
        if self.kind == "sequence":
            return tuple(np.int64(i) for i in range(t % 4))
        if self.kind == "graph":
            nodes = np.full((t % 3 + 1, 2), t, np.float32)
            return gym.spaces.GraphInstance(nodes, None, None)
        return (0, np.int64(t % 5)) if t % 2 else (1, np.full(2, t, np.float32))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0 if seed is None else seed % 7
        return self._observation(), {}

    def step(self, action: Any):
        assert action in self.action_space, action
        self.t += 1
        return self._observation(), float(self.t), self.t % 4 == 0, False, {}
