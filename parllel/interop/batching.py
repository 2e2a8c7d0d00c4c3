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
  (:class:`ObservationWriter`) and info dicts (:func:`info_row`,
  :func:`write_info_slots`, :class:`StepInfos`) into slots.

:func:`vector_actions` and :func:`stacks` are :func:`functools.singledispatch`
functions, like :mod:`parllel.cages.spaces`: a custom space plugs in by
registration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.cages.env_info import write_info_value
from parllel.cages.spaces import action_reader, zero_example
from parllel.errors import InvalidActionError
from parllel.tree import buffer_from_example, tree_items, tree_map
from parllel.tree.nodes import tree_get
from parllel.tree.utils import tree_to_builtin
from parllel.tree.writing import LeafWriter, WriteRules, describe, write_nested

__all__ = [
    "FINAL_KEYS",
    "ObservationWriter",
    "StepInfos",
    "allocate_for_space",
    "batch_copy",
    "batch_view",
    "info_row",
    "single_value",
    "stacks",
    "vector_actions",
    "write_batch",
    "write_info_slots",
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


# -- batched info dicts, read the way cages read one env's info ----------------
# Every entry is an array over envs with a boolean mask ``_key`` saying which
# envs have it (nested dicts alike; EnvPool leaves the masks out). In SAME_STEP
# mode a finished env's top-level entries are its reset info, its last step's
# are under ``final_info`` and its last observation under ``final_obs``.

#: top-level keys of a SAME_STEP info dict that are not the reset info
FINAL_KEYS = ("final_obs", "final_info")


def _is_mask(infos: Mapping[str, Any], key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_") and key[1:] in infos


def _element(values: Any, i: int, n: int) -> Any:
    """Env ``i``'s entry of a batched value (a value not batched over envs as is)."""
    if isinstance(values, Mapping):
        return info_row(values, i, n)
    if isinstance(values, np.ndarray) and values.ndim >= 1 and len(values) == n:
        item = values[i]
        return item.copy() if isinstance(item, np.ndarray) else item
    return values


def info_row(
    infos: Mapping[str, Any] | None, i: int, n: int, skip: Collection[str] = ()
) -> dict[str, Any]:
    """Env ``i``'s info dict from a batched info dict of ``n`` envs.

    Entries whose mask says env ``i`` lacks them are left out, masks
    themselves too; nested dicts are unbatched recursively. Numbers come back
    as numpy scalars (the batched arrays' items), other objects as they were.

    Args:
        infos: the batched info dict (None: no info).
        i: the env's index in the vector env.
        n: the vector env's number of envs.
        skip: top-level keys to leave out (e.g. :data:`FINAL_KEYS`).

    Example:
        >>> info_row({"t": np.array([3, 0]), "_t": np.array([True, False])}, 0, 2)
        {'t': np.int64(3)}
    """
    row: dict[str, Any] = {}
    if not infos:
        return row
    for key, values in infos.items():
        if key in skip or _is_mask(infos, key):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        row[key] = _element(values, i, n)
    return row


def _column(infos: Mapping[str, Any] | None, key: str, n: int) -> tuple[Any, Any]:
    """``(values, mask)`` of ``key`` (None, None if absent; no mask: every env)."""
    if not infos or key not in infos:
        return None, None
    mask = infos.get(f"_{key}")
    mask = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
    return infos[key], mask


def _write_rows(
    view: np.ndarray,
    index: np.ndarray,
    values: Any,
    key: str,
    exact: frozenset[type],
    env_offset: int,
) -> None:
    """``view[index] = values[index]``, every value checked as the cages check it."""
    if (
        isinstance(values, np.ndarray)
        and values.dtype.kind in "biuf"
        and values.shape[1:] == view.shape[1:]
        and len(values) == len(view)
    ):
        part = values[index]
        with np.errstate(invalid="ignore", over="ignore"):
            stored = part.astype(view.dtype)
            floats = part.dtype.kind == "f" and view.dtype.kind == "f"
            if floats or np.array_equal(
                stored.astype(part.dtype), part, equal_nan=part.dtype.kind == "f"
            ):
                view[index] = stored
                return
    # the slow path stores what fits and names the first value that does not
    n = len(view)
    for i in index.tolist():
        value = _element(values, i, n)
        if type(value) in exact:
            view[i] = value
        else:
            write_info_value(view, i, value, key, env_offset + i)


def write_info_slots(
    info_items: Sequence[tuple],
    sources: Sequence[tuple[Mapping[str, Any] | None, np.ndarray]],
    n: int,
    env_offset: int,
) -> None:
    """Write every env's preallocated info keys into their slots.

    Args:
        info_items: ``(key, view, exact_types, zero)`` per slot
            (:func:`parllel.cages.env_info.info_slots`).
        sources: ``(batched info dict, rows)`` pairs: the envs (a boolean mask
            over envs) whose step info that dict holds, e.g. the top-level
            info for envs still running and ``final_info`` for envs whose
            episode ended in a ``SAME_STEP`` vector env.
        n: number of envs.
        env_offset: global index of env 0 (for error messages).

    A key an env's info lacks writes 0, as in every cage.
    """
    for key, view, exact, zero in info_items:
        target = view.to_ndarray() if isinstance(view, Array) else view
        filled = np.zeros(n, bool)
        for infos, rows in sources:
            values, mask = _column(infos, key, n)
            if values is None:
                continue
            take = mask & rows
            if take.any():
                _write_rows(
                    target, np.flatnonzero(take), values, key, exact, env_offset
                )
                filled |= take
        if not filled.all():
            target[np.flatnonzero(~filled)] = zero


class StepInfos:
    """Where each env's step info is in one step's batched info dict.

    In autoreset mode ``SAME_STEP`` an env whose episode ended has its step
    info in ``final_info`` (the top-level entries are its reset info); else
    every env's step info is at the top level.

    Args:
        infos: the step's batched info dict.
        done: ``terminated | truncated`` over envs.
        mode: the vector env's autoreset mode.
        n: number of envs.

    Attributes:
        sources: ``(batched info dict, rows)`` pairs for :func:`write_info_slots`.
    """

    def __init__(
        self, infos: Mapping[str, Any], done: np.ndarray, mode: AutoresetMode, n: int
    ) -> None:
        self.n = n
        self._infos = infos
        self._done = done
        self._final = None
        if mode is AutoresetMode.SAME_STEP and done.any():
            self._final = infos.get("final_info")
        self.sources: list[tuple[Mapping[str, Any] | None, np.ndarray]] = (
            [(infos, np.ones(n, bool))]
            if self._final is None
            else [(infos, ~done), (self._final, done)]
        )

    def row(self, i: int) -> dict[str, Any]:
        """Env ``i``'s step info dict."""
        if self._final is not None and self._done[i]:
            return info_row(self._final, i, self.n)
        return info_row(self._infos, i, self.n, skip=FINAL_KEYS)
