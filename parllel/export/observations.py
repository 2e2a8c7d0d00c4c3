"""What every loaded policy does around its network: check and batch raw
observations, normalize them, and hand back actions ``env.step`` takes.

Shared by :class:`parllel.torch.Policy` and
:class:`parllel.export.numpy_policy.NumpyPolicy`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from parllel.cages.spaces import space_leaves, value_at, zero_example
from parllel.errors import ConfigError, ShapeError
from parllel.export.normalizer import FrozenObservationNormalizer
from parllel.tree import tree_map

__all__ = ["ObservationAdapter", "check_clip_bounds"]


def check_clip_bounds(action_space: gym.Space) -> None:
    """Refuse ``clip_actions`` for a ``Box`` without a finite bound.

    Raises:
        ConfigError: the ``Box`` has no finite bound.
    """
    if not isinstance(action_space, gym.spaces.Box):
        return
    bounds = np.concatenate([action_space.low.ravel(), action_space.high.ravel()])
    if not np.isfinite(bounds).any():
        raise ConfigError(
            f"clip_actions=True, but the policy's action space {action_space} has "
            "no finite bound, so there is nothing to clip into (gymnasium's "
            "ClipAction wrapper makes the space unbounded this way): clip the "
            "actions into the env's bounds yourself (np.clip), or train with an "
            "env whose action space keeps its bounds"
        )


class ObservationAdapter:
    """Raw observations in, batched normalized numpy inputs out; and back for actions.

    Args:
        observation_space: the env's observation space.
        action_space: the env's action space.
        observation_normalizer: the saved normalizer, or None.
        clip_actions: clip ``Box`` actions into the space's bounds.

    Raises:
        ConfigError: ``clip_actions`` with a ``Box`` without a finite bound.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        observation_normalizer: FrozenObservationNormalizer | None,
        clip_actions: bool,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.observation_normalizer = observation_normalizer
        self.clip_actions = bool(clip_actions)
        if self.clip_actions:
            check_clip_bounds(action_space)
        self._leaves = space_leaves(observation_space)
        self._example = zero_example(observation_space)

    def batch_size(self, observation: Any) -> int | None:
        """None for one observation, else the number of observations.

        Raises:
            ShapeError: the observation fits neither.
        """
        path, space = self._leaves[0]
        try:
            leaf = np.asarray(value_at(observation, path))
        except (KeyError, IndexError, TypeError):
            raise ShapeError(
                f"observation has no leaf {path!r} of the observation space "
                f"{self.observation_space}"
            ) from None
        ndim = len(space.shape or ())
        if leaf.ndim == ndim:
            return None
        if leaf.ndim == ndim + 1:
            return int(leaf.shape[0])
        raise ShapeError(
            f"observation{f' leaf {path!r}' if path else ''} has shape "
            f"{leaf.shape}; the observation space {self.observation_space} "
            f"needs {tuple(space.shape or ())} (one observation) or "
            f"[N, *{tuple(space.shape or ())}] (N observations)"
        )

    def inputs(self, observation: Any, batched: bool) -> Any:
        """Copies with the space's dtypes and a leading dim, normalized."""

        def leaf(value: Any, example: Any) -> np.ndarray:
            array = np.array(value, dtype=np.asarray(example).dtype)
            return array if batched else array[np.newaxis]

        arrays = tree_map(leaf, observation, self._example)
        if self.observation_normalizer is not None:
            self.observation_normalizer.normalize(arrays)
        return arrays

    def actions(self, action: Any, batched: bool) -> Any:
        """Numpy actions ``[N, ...]`` as ``env.step`` takes them (clipped if
        asked; one ``int`` for one ``Discrete`` action)."""
        if self.clip_actions and isinstance(self.action_space, gym.spaces.Box):
            action = np.clip(action, self.action_space.low, self.action_space.high)
        if batched:
            return action
        if isinstance(self.action_space, gym.spaces.Discrete):
            return int(action[0])
        return tree_map(lambda a: a[0], action)
