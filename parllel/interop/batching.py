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

from parllel.arrays.array import Storage
from parllel.cages.spaces import zero_example
from parllel.errors import ActionTypeError, InvalidActionError
from parllel.tree import buffer_from_example

__all__ = [
    "allocate_for_space",
    "batch_copy",
    "batch_view",
    "single_value",
    "write_batch",
    "write_per_env",
]


def allocate_for_space(space: spaces.Space, n_envs: int, storage: Storage) -> Any:
    """An ``[n_envs]`` slot tree with the dtypes and shapes of ``space``'s values
    (custom spaces as registered with :func:`~parllel.cages.zero_example`)."""
    return buffer_from_example(zero_example(space), (n_envs,), storage)


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
        ActionTypeError: the structure does not fit, or a scalar came where
            a batch was expected (also a ``TypeError``, as in gymnasium).
        InvalidActionError: the number of envs (leading dimension), the
            per-env shape, or the dtype (not castable with numpy's
            ``same_kind`` rule, e.g. floats for a Discrete space) does not fit.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise ActionTypeError(
                f"actions{path} must be a dict with keys {sorted(space.spaces)}, "
                f"got {_describe(value)}"
            )
        for key, sub in space.spaces.items():
            write_batch(sub, tree[key], value[key], f"{path}[{key!r}]")
        return
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            raise ActionTypeError(
                f"actions{path} must be a tuple of {len(space.spaces)} batches, "
                f"got {_describe(value)}"
            )
        for i, (sub, item) in enumerate(zip(space.spaces, value)):
            write_batch(sub, tree[str(i)], item, f"{path}[{i}]")
        return
    leaf = tree.to_ndarray() if not isinstance(tree, np.ndarray) else tree
    array = np.asarray(value)
    if array.ndim == 0:
        raise ActionTypeError(
            f"actions{path} are the scalar {value!r}; expected a batch of shape "
            f"{leaf.shape} (one action for each of {leaf.shape[0]} envs)"
        )
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


def write_per_env(space: spaces.Space, tree: Any, actions: Any) -> None:
    """Write one action per env (SB3's ``actions[i]`` is env ``i``'s) into ``tree``.

    ``actions``: a list, tuple or 1-d object array with an element of
    ``space`` for every env (a Dict space's dicts, a Tuple space's tuples).

    Raises:
        ActionTypeError: ``actions`` is no sequence, or an element does not
            have the space's structure.
        InvalidActionError: the number of actions, or an element's shape or
            dtype, does not fit.
    """
    n_envs = _n_rows(space, tree)
    if isinstance(actions, (dict, str)) or not hasattr(actions, "__len__"):
        raise ActionTypeError(
            f"actions must be a sequence of one action per env ({n_envs}), got "
            f"{_describe(actions)}"
        )
    if len(actions) != n_envs:
        raise InvalidActionError(f"got {len(actions)} actions for {n_envs} envs")
    for i, action in enumerate(actions):
        _write_row(space, tree, i, action, f"[{i}]")


def _n_rows(space: spaces.Space, tree: Any) -> int:
    if isinstance(space, spaces.Dict):
        key = next(iter(space.spaces))
        return _n_rows(space.spaces[key], tree[key])
    if isinstance(space, spaces.Tuple):
        return _n_rows(space.spaces[0], tree["0"])
    return len(tree.to_ndarray())


def _write_row(space: spaces.Space, tree: Any, i: int, value: Any, path: str) -> None:
    """Write env ``i``'s action ``value`` into row ``i`` of ``tree``'s leaves."""
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise ActionTypeError(
                f"action{path} must be a dict with keys {sorted(space.spaces)}, "
                f"got {_describe(value)}"
            )
        for key, sub in space.spaces.items():
            _write_row(sub, tree[key], i, value[key], f"{path}[{key!r}]")
        return
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            raise ActionTypeError(
                f"action{path} must be a tuple of {len(space.spaces)} values, "
                f"got {_describe(value)}"
            )
        for j, (sub, item) in enumerate(zip(space.spaces, value)):
            _write_row(sub, tree[str(j)], i, item, f"{path}[{j}]")
        return
    leaf = tree.to_ndarray()
    array = np.asarray(value)
    if array.shape != leaf.shape[1:]:
        raise InvalidActionError(
            f"action{path} has shape {array.shape}; expected {leaf.shape[1:]}"
        )
    if not np.can_cast(array.dtype, leaf.dtype, "same_kind"):
        raise InvalidActionError(
            f"action{path} has dtype {array.dtype}, which does not fit {space} "
            f"(dtype {leaf.dtype})"
        )
    leaf[i] = array


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {sorted(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"{type(value).__name__} {value!r}"[:200]
