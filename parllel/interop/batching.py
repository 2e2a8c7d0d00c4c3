"""Between gymnasium's batched values and parllel's slot trees, both ways.

Gymnasium batches a ``Dict`` space as a dict, a ``Tuple`` space as a tuple and
every other space with a fixed shape as one array with the env dimension first
(``gymnasium.vector.utils.batch_space``); other spaces become a tuple with one
element per env. parllel keeps the same leaves in an
:class:`~parllel.tree.ArrayDict` allocated from the space (a tuple's children
under keys ``"0"``, ``"1"``, ...).

- The adapters (:func:`~parllel.interop.make_vec`, the SB3 one) write
  gymnasium's batched actions into slots (:func:`write_batch`,
  :func:`write_per_env`) and read observations out (:func:`batch_view`,
  :func:`batch_copy`, :func:`single_value`).
- The cages over a vector env read the action slots as the batch the vector
  env takes (:func:`vector_actions`) and write its batched observations
  (:class:`ObservationWriter`) into slots; their info dicts are
  :mod:`parllel.interop.batched_infos`'.

:func:`vector_actions` and :func:`stacks` are :func:`functools.singledispatch`
functions, like :mod:`parllel.cages.spaces`: a custom space plugs in by
registration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import iterate

from parllel.arrays.array import Storage
from parllel.cages.spaces import action_reader, zero_example
from parllel.errors import InvalidActionError
from parllel.tree import buffer_from_example, tree_items, tree_map
from parllel.tree.nodes import tree_get
from parllel.tree.utils import tree_to_builtin
from parllel.tree.writing import LeafWriter, WriteRules, describe, write_nested

__all__ = [
    "ObservationWriter",
    "allocate_for_space",
    "batch_copy",
    "batch_view",
    "single_value",
    "stacks",
    "vector_actions",
    "write_batch",
    "write_per_env",
]

#: A batch's structure must be the space's; a wrong one is also a TypeError.
_BATCH_RULES = WriteRules(what="actions", error=InvalidActionError)


# -- the adapters: gymnasium batches into and out of slots ---------------------


def allocate_for_space(space: gym.Space, n_envs: int, storage: Storage) -> Any:
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


# -- the cages over a vector env: the batched actions it takes -----------------


def _copy_leaf(view: Any) -> np.ndarray:
    # a copy: the sampler overwrites the slot while envs may keep their action
    return np.array(view)


@functools.singledispatch
def vector_actions(space: gym.Space) -> Callable[[Any], Any]:
    """Return ``batch(action_slots) -> actions`` for a vector env's ``step``.

    ``space`` is the single-env action space; ``action_slots`` hold every
    env's action on a leading dimension (a view, or a tree of views keyed like
    :func:`parllel.cages.spaces.space_leaves`). A space with a fixed shape and dtype
    gives a copied ``[n_envs, ...]`` array (what gymnasium's ``batch_space``
    makes of ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary``);
    ``Dict`` and ``Tuple`` give a dict / tuple of their children's batches.
    Other spaces give a tuple of single actions (gymnasium's generic
    batching), read with :func:`parllel.cages.spaces.action_reader`. Register a
    function for a custom space that a vector env batches otherwise.
    """
    if space.shape is not None and space.dtype is not None:
        return _copy_leaf
    read = action_reader(space)
    return lambda views: tuple(read(views))


@vector_actions.register
def _(space: gym.spaces.Dict) -> Callable[[Any], Any]:
    batchers = {key: vector_actions(sub) for key, sub in space.spaces.items()}
    return lambda views: {
        key: batch(tree_get(views, key)) for key, batch in batchers.items()
    }


@vector_actions.register
def _(space: gym.spaces.Tuple) -> Callable[[Any], Any]:
    batchers = [vector_actions(sub) for sub in space.spaces]
    return lambda views: tuple(
        batch(tree_get(views, str(j))) for j, batch in enumerate(batchers)
    )


# -- the cages over a vector env: its batched observations into slots ---------


@functools.singledispatch
def stacks(space: gym.Space) -> bool:
    """True if a vector env batches ``space``'s elements as stacked arrays.

    gymnasium stacks ``Box``, ``Discrete``, ``MultiDiscrete`` and
    ``MultiBinary`` elements (``[n_envs, ...]`` arrays), and ``Dict`` /
    ``Tuple`` of those as dicts / tuples of stacked arrays; other spaces
    become a tuple with one element per env. Register ``True`` for a custom
    space whose batches are stacked arrays keyed like its
    :func:`parllel.cages.spaces.space_leaves`.
    """
    return False


@stacks.register(gym.spaces.Box)
@stacks.register(gym.spaces.Discrete)
@stacks.register(gym.spaces.MultiDiscrete)
@stacks.register(gym.spaces.MultiBinary)
def _(space: gym.Space) -> bool:
    return True


@stacks.register
def _(space: gym.spaces.Dict) -> bool:
    return all(stacks(sub) for sub in space.spaces.values())


@stacks.register
def _(space: gym.spaces.Tuple) -> bool:
    return all(stacks(sub) for sub in space.spaces)


class ObservationWriter:
    """Writes a vector env's batched observations into ``[n_envs]`` slots.

    Slots are written the way every cage writes them (an observation view,
    or a tree of views, indexed by env), so dtype and shape checks are the
    same. Stacked batches (:func:`stacks`) are written in one assignment per
    call; others one env at a time.

    Args:
        space: the single-env observation space.
        batched_space: the vector env's ``observation_space``.
    """

    def __init__(self, space: gym.Space, batched_space: gym.Space) -> None:
        self.batched_space = batched_space
        self.stacked = stacks(space)

    def rows(self, batched: Any) -> list[Any]:
        """Every env's observation, in the single-env form."""
        return list(iterate(self.batched_space, batched))

    def row(self, batched: Any, i: int) -> Any:
        """Env ``i``'s observation (views into ``batched`` where it is stacked)."""
        if self.stacked:
            return tree_map(lambda leaf: leaf[i], batched)
        return self.rows(batched)[i]

    def write(self, out: Any, batched: Any) -> None:
        """Write every env's row of ``batched`` into ``out``."""
        if self.stacked:
            out[:] = batched
            return
        for i, row in enumerate(self.rows(batched)):
            out[i] = row

    def write_rows(self, out: Any, batched: Any, index: Sequence[int]) -> None:
        """Write rows ``index`` of ``batched`` into the same rows of ``out``."""
        if self.stacked:
            rows = np.asarray(index, dtype=np.intp)
            out[rows] = tree_map(lambda leaf: leaf[rows], batched)
            return
        every_row = self.rows(batched)
        for i in index:
            out[i] = every_row[i]
