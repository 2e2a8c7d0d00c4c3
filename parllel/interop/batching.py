"""Between gymnasium's batched values and parllel's slot trees.

Gymnasium batches a ``Dict`` space as a dict, a ``Tuple`` space as a tuple and
every other space as one array with the env dimension first
(``gymnasium.vector.utils.batch_space``). parllel keeps the same leaves in an
:class:`~parllel.tree.ArrayDict` allocated from the space (a tuple's children
under keys ``"0"``, ``"1"``, ...), so these functions walk the tree alone:
reading with :func:`~parllel.tree.utils.tree_to_builtin`, writing with the one
tree writer, :func:`~parllel.tree.writing.write_nested`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from parllel.arrays.array import Storage
from parllel.cages.spaces import zero_example
from parllel.errors import InvalidActionError
from parllel.tree import buffer_from_example, tree_items
from parllel.tree.utils import tree_to_builtin
from parllel.tree.writing import LeafWriter, WriteRules, describe, write_nested

__all__ = [
    "allocate_for_space",
    "batch_copy",
    "batch_view",
    "single_value",
    "write_batch",
    "write_per_env",
]

#: A batch's structure must be the space's; a wrong one is also a TypeError.
_BATCH_RULES = WriteRules(what="actions", error=InvalidActionError)


def allocate_for_space(space: spaces.Space, n_envs: int, storage: Storage) -> Any:
    """An ``[n_envs]`` slot tree with the dtypes and shapes of ``space``'s values
    (custom spaces as registered with :func:`~parllel.cages.spaces.zero_example`)."""
    return buffer_from_example(zero_example(space), (n_envs,), storage)


def batch_view(tree: Any) -> Any:
    """``tree``'s leaves as numpy views, in gymnasium's batched structure (no copy)."""
    return tree_to_builtin(tree, _view)


def batch_copy(tree: Any) -> Any:
    """Like :func:`batch_view`, with every leaf copied."""
    return tree_to_builtin(tree, lambda leaf: np.array(_view(leaf)))


def single_value(tree: Any, index: int) -> Any:
    """Env ``index``'s value in ``tree`` (copied), structured like ``space.sample()``."""

    def row(leaf: Any) -> Any:
        value = _view(leaf)[index]
        return value.copy() if isinstance(value, np.ndarray) else value  # a scalar

    return tree_to_builtin(tree, row)


def write_batch(tree: Any, value: Any) -> None:
    """Write a gymnasium batch (e.g. of actions) into ``tree``'s leaves.

    Raises:
        InvalidActionError: the structure does not fit, or a scalar came where
            a batch was expected (also a ``TypeError``, as in gymnasium).
        InvalidActionError: the number of envs (leading dimension), the
            per-env shape, or the dtype (not castable with numpy's
            ``same_kind`` rule, e.g. floats for a Discrete space) does not fit.
    """
    write_nested(tree, value, _write_leaf_batch, _BATCH_RULES)


def write_per_env(tree: Any, actions: Any) -> None:
    """Write one action per env (SB3's ``actions[i]`` is env ``i``'s) into ``tree``.

    ``actions``: a list, tuple or 1-d object array with an element of the
    space for every env (a Dict space's dicts, a Tuple space's tuples).

    Raises:
        InvalidActionError: ``actions`` is no sequence, or an element does not
            have the space's structure.
        InvalidActionError: the number of actions, or an element's shape or
            dtype, does not fit.
    """
    n_envs = len(_view(next(tree_items(tree))[1]))
    if isinstance(actions, (dict, str)) or not hasattr(actions, "__len__"):
        raise InvalidActionError(
            f"actions must be a sequence of one action per env ({n_envs}), got "
            f"{describe(actions)}"
        )
    if len(actions) != n_envs:
        raise InvalidActionError(f"got {len(actions)} actions for {n_envs} envs")
    for i, action in enumerate(actions):
        rules = WriteRules(what=f"action[{i}]", error=InvalidActionError)
        write_nested(tree, action, _row_writer(i), rules)


def _view(leaf: Any) -> np.ndarray:
    """An Array leaf's numpy view (an ndarray leaf as it is)."""
    return leaf if isinstance(leaf, np.ndarray) else leaf.to_ndarray()


def _write_leaf_batch(tree_leaf: Any, value: Any, path: str) -> None:
    """Write one leaf's batch (every env's value) into its slots."""
    where = f" at {path!r}" if path else ""
    leaf = _view(tree_leaf)
    array = np.asarray(value)
    if array.ndim == 0:
        raise InvalidActionError(
            f"actions{where} are the scalar {value!r}; expected a batch of shape "
            f"{leaf.shape} (one action for each of {leaf.shape[0]} envs)"
        )
    if array.shape != leaf.shape:
        raise InvalidActionError(
            f"actions{where} have shape {array.shape}; expected {leaf.shape} "
            f"(one action of shape {leaf.shape[1:]} for each of {leaf.shape[0]} envs)"
        )
    if not np.can_cast(array.dtype, leaf.dtype, "same_kind"):
        raise InvalidActionError(
            f"actions{where} have dtype {array.dtype}, which does not fit the "
            f"space's dtype {leaf.dtype}; convert them, e.g. "
            f"actions.astype(np.{leaf.dtype})"
        )
    leaf[...] = array


def _row_writer(i: int) -> LeafWriter:
    """The leaf writer of env ``i``'s action (row ``i`` of every leaf)."""

    def write(tree_leaf: Any, value: Any, path: str) -> None:
        where = f"action[{i}]" + (f" at {path!r}" if path else "")
        leaf = _view(tree_leaf)
        array = np.asarray(value)
        if array.shape != leaf.shape[1:]:
            raise InvalidActionError(
                f"{where} has shape {array.shape}; expected {leaf.shape[1:]}"
            )
        if not np.can_cast(array.dtype, leaf.dtype, "same_kind"):
            raise InvalidActionError(
                f"{where} has dtype {array.dtype}, which does not fit the "
                f"space's dtype {leaf.dtype}"
            )
        leaf[i] = array

    return write
