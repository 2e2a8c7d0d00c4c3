"""Between gymnasium's batched values and parllel's slot trees, led by the space.

Gymnasium batches a ``Dict`` space as a dict, a ``Tuple`` space as a tuple and
every other space as one array with the env dimension first
(``gymnasium.vector.utils.batch_space``). parllel keeps the same leaves in an
:class:`~parllel.tree.ArrayDict` (a tuple's children under keys ``"0"``,
``"1"``, ...). These functions walk the space and the tree together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from parllel.arrays import Storage
from parllel.errors import InvalidActionError
from parllel.tree import buffer_from_example

__all__ = [
    "allocate_for_space",
    "batch_copy",
    "batch_view",
    "single_value",
    "write_batch",
]


def allocate_for_space(space: spaces.Space, n_envs: int, storage: Storage) -> Any:
    """An ``[n_envs]`` slot tree with the dtypes and shapes of ``space``'s values."""
    return buffer_from_example(_zero(space), (n_envs,), storage)


def _zero(space: spaces.Space) -> Any:
    if isinstance(space, spaces.Dict):
        return {key: _zero(sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_zero(sub) for sub in space.spaces)
    if space.shape is None or space.dtype is None:
        raise TypeError(f"cannot preallocate values of {space!r}")
    return np.zeros(space.shape, space.dtype)


def batch_view(space: spaces.Space, tree: Any) -> Any:
    """``tree``'s leaves as numpy views, in gymnasium's batched structure (no copy)."""
    if isinstance(space, spaces.Dict):
        return {key: batch_view(sub, tree[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(batch_view(sub, tree[str(i)]) for i, sub in enumerate(space))
    return tree.to_ndarray()


def batch_copy(space: spaces.Space, tree: Any) -> Any:
    """Like :func:`batch_view`, with every leaf copied."""
    if isinstance(space, spaces.Dict):
        return {key: batch_copy(sub, tree[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(batch_copy(sub, tree[str(i)]) for i, sub in enumerate(space))
    return np.array(tree.to_ndarray())


def single_value(space: spaces.Space, tree: Any, index: int) -> Any:
    """Env ``index``'s value in ``tree`` (copied), structured like ``space.sample()``."""
    if isinstance(space, spaces.Dict):
        return {
            key: single_value(sub, tree[key], index)
            for key, sub in space.spaces.items()
        }
    if isinstance(space, spaces.Tuple):
        return tuple(
            single_value(sub, tree[str(i)], index) for i, sub in enumerate(space)
        )
    value = tree.to_ndarray()[index]
    return value.copy() if isinstance(value, np.ndarray) else value  # a numpy scalar


def write_batch(space: spaces.Space, tree: Any, value: Any, path: str = "") -> None:
    """Write a gymnasium batch of ``space`` (e.g. actions) into ``tree``'s leaves.

    Raises:
        InvalidActionError: the structure, the number of envs (leading
            dimension), the per-env shape, or the dtype (not castable with
            numpy's ``same_kind`` rule, e.g. floats for a Discrete space)
            does not fit.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise InvalidActionError(
                f"actions{path} must be a dict with keys {sorted(space.spaces)}, "
                f"got {_describe(value)}"
            )
        for key, sub in space.spaces.items():
            write_batch(sub, tree[key], value[key], f"{path}[{key!r}]")
        return
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            raise InvalidActionError(
                f"actions{path} must be a tuple of {len(space.spaces)} batches, "
                f"got {_describe(value)}"
            )
        for i, (sub, item) in enumerate(zip(space.spaces, value)):
            write_batch(sub, tree[str(i)], item, f"{path}[{i}]")
        return
    leaf = tree.to_ndarray() if not isinstance(tree, np.ndarray) else tree
    array = np.asarray(value)
    if array.shape != leaf.shape:
        raise InvalidActionError(
            f"actions{path} have shape {array.shape}; expected {leaf.shape} "
            f"(one action of shape {leaf.shape[1:]} for each of {leaf.shape[0]} envs)"
        )
    if not np.can_cast(array.dtype, leaf.dtype, "same_kind"):
        raise InvalidActionError(
            f"actions{path} have dtype {array.dtype}, which does not fit {space} "
            f"(dtype {leaf.dtype}); convert them, e.g. actions.astype(np.{leaf.dtype})"
        )
    leaf[...] = array


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"{type(value).__name__} {value!r}"[:200]
