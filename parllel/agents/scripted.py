"""Numpy agents that need no framework: random actions and scripted policies."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from parllel import fields
from parllel.agents.base import AgentStep, check_mode
from parllel.tree import tree_items


def _first_leaf(tree: Any) -> np.ndarray:
    for _, leaf in tree_items(tree):
        return np.asarray(leaf)
    raise ValueError("the observation has no leaves")


@functools.singledispatch
def sample_actions(space: gym.Space, n: int, rng: np.random.Generator) -> Any:
    """``n`` random actions of ``space`` stacked on a leading dim (seeded by ``rng``).

    Dict actions are dicts and Tuple actions tuples of stacked leaves (the
    sample tree accepts both). The default samples a copy of the space
    ``n`` times (the space's own generator is left alone); register a
    function for a custom space, as for the cage's space functions
    (docs/cages.md).
    """
    space = copy.deepcopy(space)
    space.seed(int(rng.integers(2**31)))
    return np.stack([np.asarray(space.sample()) for _ in range(n)])


@sample_actions.register
def _(space: gym.spaces.Dict, n: int, rng: np.random.Generator) -> dict:
    return {k: sample_actions(s, n, rng) for k, s in space.spaces.items()}


@sample_actions.register
def _(space: gym.spaces.Tuple, n: int, rng: np.random.Generator) -> tuple:
    return tuple(sample_actions(s, n, rng) for s in space.spaces)


@sample_actions.register
def _(space: gym.spaces.Discrete, n: int, rng: np.random.Generator) -> np.ndarray:
    values = rng.integers(space.start, space.start + space.n, n)
    return values.astype(space.dtype)


@sample_actions.register
def _(space: gym.spaces.MultiDiscrete, n: int, rng: np.random.Generator) -> np.ndarray:
    start = np.broadcast_to(space.start, space.shape)
    values = rng.integers(start, start + space.nvec, (n, *space.shape))
    return values.astype(space.dtype)


@sample_actions.register
def _(space: gym.spaces.MultiBinary, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 2, (n, *space.shape)).astype(space.dtype)


@sample_actions.register
def _(space: gym.spaces.Box, n: int, rng: np.random.Generator) -> np.ndarray:
    if not space.is_bounded("both"):
        return sample_actions.dispatch(gym.Space)(space, n, rng)
    low = np.broadcast_to(space.low, space.shape)
    high = np.broadcast_to(space.high, space.shape)
    values = rng.uniform(low, high, (n, *space.shape))
    if space.dtype.kind in "iu":
        values = np.floor(values)
    return values.astype(space.dtype)


class _FeedForwardAgent:
    """What the agents here share: no recurrent state, a mode the actions ignore."""

    mode = "sample"

    def initial_state(self, n_envs: int) -> None:
        """No recurrent state."""
        return None

    def set_mode(self, mode: str) -> None:
        """Record the mode (the actions do not depend on it)."""
        self.mode = check_mode(mode)


class RandomAgent(_FeedForwardAgent):
    """Uniformly random actions from an action space; value 0. Numpy only.

    Useful as a baseline, for decorrelating envs and for testing samplers
    without a framework. Its ``agent_info`` is empty. It ignores action masks
    (an ``action_mask`` observation leaf), so it plays illegal moves in games
    that have them; a :class:`ScriptedAgent` reading the mask plays legal ones.

    Args:
        action_space: the envs' action space.
        seed: seed of the agent's generator.

    Example:
        >>> agent = RandomAgent(gym.spaces.Discrete(3), seed=0)
        >>> agent.step(np.zeros((4, 2)), None, None, None).action.shape
        (4,)
    """

    def __init__(self, action_space: gym.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self.rng = np.random.default_rng(seed)

    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Random actions for every observation row."""
        n = len(_first_leaf(observation))
        return AgentStep(sample_actions(self.action_space, n, self.rng), {})

    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> np.ndarray:
        """Zeros ``[N]``."""
        return np.zeros(len(_first_leaf(observation)), np.float32)


class ScriptedAgent(_FeedForwardAgent):
    """A feed-forward numpy agent from plain functions.

    ``policy(observation, prev_action, prev_reward) -> actions [N, ...]``;
    ``value_fn(observation) -> [N]`` (optional) is also recorded as
    ``agent_info.value`` at every step, so advantage estimation can run.

    Args:
        policy: the action function (vectorized over the leading dim).
        value_fn: the value function, or None (then ``agent_info`` is empty
            and :meth:`value` returns zeros).

    Example:
        >>> agent = ScriptedAgent(lambda obs, a, r: (obs[:, 0] > 0).astype(np.int64),
        ...                       value_fn=lambda obs: obs[:, 1])
    """

    def __init__(
        self,
        policy: Callable[[Any, Any, Any], Any],
        value_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        self.policy = policy
        self.value_fn = value_fn

    def step(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> AgentStep:
        """Actions from ``policy``; ``agent_info`` holds the value if there is one."""
        action = self.policy(observation, prev_action, prev_reward)
        info = {}
        if self.value_fn is not None:
            info[fields.VALUE] = np.asarray(self.value_fn(observation), np.float32)
        return AgentStep(action, info)

    def value(
        self, observation: Any, prev_action: Any, prev_reward: Any, state: Any
    ) -> np.ndarray:
        """``value_fn(observation)``, or zeros."""
        if self.value_fn is None:
            return np.zeros(len(_first_leaf(observation)), np.float32)
        return np.asarray(self.value_fn(observation), np.float32)
