"""Bookkeeping over a replay tree of full-size rotating Arrays.

Each batch lands in the ``[T, B]`` window of full-size Arrays
(``Array((T, B), ..., full_size=N)``): copied in from the sampler's own
sample tree by :meth:`ReplayStorage.record_batch(sample_tree)
<ReplayStorage.record_batch>` (which then rotates the replay tree), or
written there by a custom sampler and declared stored by ``record_batch()``.
Sampling reads the stored rows in place.

Row layout (``P`` = padding of ``OBSERVATION``, at least 1). In the Arrays'
storage, full-size row ``i`` holds step ``i`` (mod ``N``); the observation of
the step after row ``i`` is at row ``i + 1``, where row ``N`` is the trailing
padding row: the bootstrap observation of the last window of a lap. Writing a
window's bootstrap row ``OBSERVATION[T]`` overwrites the observation of the
oldest stored step, and rotating across the wrap-around copies the bootstrap
row to row 0, so at most ``N - 1`` steps per env are ever stored intact; this
module never offers the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError, ReplayError
from parllel.replays.copying import copy_pairs, window
from parllel.tree import tree_items

__all__ = ["ReplayStorage", "REQUIRED_FIELDS"]

REQUIRED_FIELDS = (
    fields.OBSERVATION,
    fields.ACTION,
    fields.REWARD,
    fields.TERMINATED,
    fields.TRUNCATED,
    fields.FINAL_OBSERVATION,
)


def _address(view: np.ndarray) -> int:
    return view.__array_interface__["data"][0]


def _rows_view(array: Array, rows: int) -> np.ndarray:
    """View of the first ``rows`` full-size rows of ``array`` (may reach the padding).

    ``array.full`` starts at full-size row 0 but only spans the rows written
    so far; the storage behind it always holds ``full_size + 2 * padding`` rows,
    so extending the view to ``full_size + padding`` rows stays in bounds.
    """
    if rows > array.full_size + array.padding:
        raise ConfigError("internal: rows beyond the array's storage")
    start = array.full
    return as_strided(
        start, shape=(rows,) + start.shape[1:], strides=start.strides, writeable=False
    )


class ReplayStorage:
    """Which rows of a full-size replay tree hold intact transitions.

    Shared by :class:`~parllel.replays.UniformReplay` and
    :class:`~parllel.replays.PrioritizedReplay`. A *position* is the flat index
    ``row * B + env`` of one stored step.

    Example:
        >>> storage = ReplayStorage(tree)   # tree leaves: Array((T, B), full_size=N)
        >>> # ... sampler fills the window ...
        >>> storage.record_batch()          # then rotate the tree before the next batch
        >>> storage.num_transitions
        T * B

    Args:
        tree: an ArrayDict (or mapping) with at least the fields
            ``OBSERVATION`` (padding >= 1), ``ACTION``, ``REWARD``,
            ``TERMINATED``, ``TRUNCATED`` and ``FINAL_OBSERVATION``; every leaf a
            full-size :class:`~parllel.arrays.Array` with the same ``(T, B)``
            and ``full_size``. Other fields are ignored.

    Raises:
        ConfigError: a field is missing or a leaf does not fit.
    """

    def __init__(self, tree: Mapping[str, Any]) -> None:
        missing = [name for name in REQUIRED_FIELDS if name not in tree]
        if missing:
            raise ConfigError(
                f"the replay tree lacks the fields {missing}; it needs {list(REQUIRED_FIELDS)}"
            )
        leaves = [
            (f"{name}.{path}" if path else name, leaf)
            for name in REQUIRED_FIELDS
            for path, leaf in tree_items(tree[name])
        ]
        first = tree[fields.OBSERVATION]
        first = next(leaf for _, leaf in tree_items(first))
        if not isinstance(first, Array):
            raise ConfigError("replay tree leaves must be parllel Arrays")
        if len(first.batch_shape) != 2:
            raise ConfigError(
                f"replay tree leaves need batch_shape (T, B); got {first.batch_shape}"
            )
        self.batch_length, self.num_envs = first.batch_shape
        self.full_size = first.full_size
        for path, leaf in leaves:
            if not isinstance(leaf, Array):
                raise ConfigError(f"replay tree leaf {path!r} is not a parllel Array")
            if (
                leaf.batch_shape != first.batch_shape
                or leaf.full_size != self.full_size
            ):
                raise ConfigError(
                    f"replay tree leaf {path!r} has batch_shape {leaf.batch_shape} and "
                    f"full_size {leaf.full_size}; expected {first.batch_shape} and "
                    f"{self.full_size}"
                )
            if path.split(".")[0] == fields.OBSERVATION and leaf.padding < 1:
                raise ConfigError(
                    f"replay tree leaf {path!r} needs padding >= 1 (the bootstrap row)"
                )
        if self.full_size < 2:
            raise ConfigError("full_size must be at least 2 to store a transition")
        self.tree = tree
        self.capacity = self.full_size - 1  # steps per env (see the module docstring)
        self._leaves = leaves
        self._window_leaf = first
        self._window_rows = _rows_view(first, self.full_size)
        # [N (+1), B, ...] read-only views over every full-size row
        self.rows = {
            name: _tree_map_leaves(
                tree[name],
                lambda leaf, name=name: _rows_view(
                    leaf, self.full_size + (name == fields.OBSERVATION)
                ),
            )
            for name in REQUIRED_FIELDS
        }
        self.cursor = 0  # row where the next recorded window starts
        self.size = 0  # intact stored steps per env
        self.steps_recorded = 0  # steps per env recorded since construction
        self._copy_source: Any = None  # sample tree last copied from
        self._copy_pairs: list[tuple[Array, Array, bool]] = []
        self._episode_break = False  # set on resume: the envs were reset

    # -- recording ---------------------------------------------------------
    def window_start(self, leaf: Array | None = None) -> int:
        """Full-size row where ``leaf``'s (default: the observation's) window starts."""
        leaf = self._window_leaf if leaf is None else leaf
        base = _rows_view(leaf, 1)
        row_stride = base.strides[0]
        return (_address(leaf.to_ndarray()) - _address(base)) // row_stride

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Declare a batch stored; return the number of new transitions.

        Two ways to fill the replay:

        - ``batch=None`` (zero-copy): the sampler wrote straight into this
          tree's window. Call once per collected batch, before the tree is
          rotated for the next one (a sampler that rotates at the *start* of
          each batch does exactly that). The first batch of an empty replay
          may start at any row; later ones must follow on.
        - ``batch=sample_tree`` (copy): the sampler wrote into its own
          ``[T, B]`` tree; its window (``OBSERVATION`` rows ``0..T``) is
          copied into this tree's window, recorded, and this tree is rotated
          to the next window. Nobody else rotates the replay tree then.

        Raises:
            ReplayError: the window is not where the next batch belongs
                (a batch was recorded twice, or the tree rotated without one).
            ConfigError: ``batch`` does not match the replay tree.
        """
        copying = batch is not None and batch is not self.tree
        if copying:
            self._write_batch(batch)
        if self.size == 0:
            self.cursor = self.window_start()
        # copying, this replay alone rotates its tree: one leaf speaks for all
        for path, leaf in self._leaves[:1] if copying else self._leaves:
            start = self.window_start(leaf)
            if start != self.cursor:
                raise ReplayError(
                    f"the window of {path!r} starts at row {start}, but the replay "
                    f"expects the next batch at row {self.cursor}: call record_batch() "
                    "exactly once per collected batch, before rotating the tree"
                )
        self.cursor = (self.cursor + self.batch_length) % self.full_size
        self.size = min(self.size + self.batch_length, self.capacity)
        self.steps_recorded += self.batch_length
        if copying:
            self.tree.rotate()
        return self.batch_length * self.num_envs

    def _write_batch(self, batch: Mapping[str, Any]) -> None:
        """Copy ``batch``'s window into this tree's window (see :meth:`record_batch`)."""
        if self._copy_source is not batch:
            self._copy_pairs = copy_pairs(self._leaves, batch, self.batch_length)
            self._copy_source = batch
        if self._episode_break and self.size:
            self._cut_episodes()
        self._episode_break = False
        T = self.batch_length
        for source, target, rows in self._copy_pairs:
            np.copyto(window(target, rows, T), window(source, rows, T))

    def _cut_episodes(self) -> None:
        """Truncate the newest stored step where the next batch starts a new episode.

        After a resume the sampler resets its envs, so the next window's first
        observation is a reset observation, not the next observation of the
        newest stored step. Before it is overwritten, that true next
        observation becomes the step's final observation and the step is
        marked truncated (it still bootstraps from it).
        """
        newest = (self.cursor - 1) % self.full_size
        observation = self.tree[fields.OBSERVATION]
        final = self.tree[fields.FINAL_OBSERVATION]
        ended = (
            self.rows[fields.TERMINATED][newest] | self.rows[fields.TRUNCATED][newest]
        )
        open_envs = np.flatnonzero(~ended)
        if not open_envs.size:
            return
        for (_, obs_leaf), (_, final_leaf) in zip(
            tree_items(observation), tree_items(final)
        ):
            _writable_rows(final_leaf)[newest, open_envs] = obs_leaf.to_ndarray()[
                0, open_envs
            ]
        _writable_rows(self.tree[fields.TRUNCATED])[newest, open_envs] = True

    # -- positions ---------------------------------------------------------
    @property
    def num_transitions(self) -> int:
        """Intact transitions stored, over all envs."""
        return self.size * self.num_envs

    @property
    def oldest_row(self) -> int:
        """Row of the oldest intact step."""
        return (self.cursor - self.size) % self.full_size

    def rows_envs(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split flat positions ``row * B + env`` into ``(rows, envs)``."""
        return np.divmod(np.asarray(positions, dtype=np.int64), self.num_envs)

    def positions_from_age(self, ages: np.ndarray) -> np.ndarray:
        """Positions of ``ages`` in ``[0, num_transitions)`` (0 = oldest row, env 0)."""
        offsets, envs = np.divmod(np.asarray(ages, dtype=np.int64), self.num_envs)
        rows = (self.oldest_row + offsets) % self.full_size
        return rows * self.num_envs + envs

    def steps_available(self, rows: np.ndarray) -> np.ndarray:
        """Stored steps from each row to the newest one, inclusive."""
        return self.size - (rows - self.oldest_row) % self.full_size

    def is_stored(self, positions: np.ndarray) -> np.ndarray:
        """Bool mask: which positions hold intact transitions now."""
        rows, _ = self.rows_envs(positions)
        return ((rows - self.oldest_row) % self.full_size < self.size) & (
            np.asarray(positions) >= 0
        )

    def new_window_positions(self) -> np.ndarray:
        """Positions of the most recently recorded window."""
        start = (self.cursor - self.batch_length) % self.full_size
        rows = np.arange(start, start + self.batch_length)
        return (rows[:, None] * self.num_envs + np.arange(self.num_envs)).ravel()

    # -- checkpoints -------------------------------------------------------
    def state_dict(self, include_contents: bool = False) -> dict[str, Any]:
        """Counters, the tree's window position and optionally copies of the rows."""
        state: dict[str, Any] = {
            "cursor": self.cursor,
            "size": self.size,
            "steps_recorded": self.steps_recorded,
            "window_start": self.window_start(),
            "full_size": self.full_size,
            "batch_shape": (self.batch_length, self.num_envs),
        }
        if include_contents:
            state["contents"] = {
                name: _tree_map_leaves(self.rows[name], np.array)
                for name in REQUIRED_FIELDS
            }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        With contents, the tree is rotated until its window is where it was
        saved and every row is written back. Without them the replay restarts
        empty, aligned with the tree's current window (counters are kept).

        Raises:
            ConfigError: the state was saved from a differently shaped tree.
        """
        shape = (self.batch_length, self.num_envs)
        if (
            int(state["full_size"]) != self.full_size
            or tuple(state["batch_shape"]) != shape
        ):
            raise ConfigError(
                f"replay state of full_size {state['full_size']} and batch_shape "
                f"{tuple(state['batch_shape'])} does not fit this tree "
                f"({self.full_size}, {shape})"
            )
        self.steps_recorded = int(state["steps_recorded"])
        self._episode_break = True
        if "contents" not in state:
            self.cursor, self.size = self.window_start(), 0
            return
        for _ in range(self.full_size // self.batch_length + 1):
            if self.window_start() == int(state["window_start"]):
                break
            self.tree.rotate()
        for name in REQUIRED_FIELDS:
            _write_rows(self.tree[name], state["contents"][name])
        self.cursor, self.size = int(state["cursor"]), int(state["size"])


def _tree_map_leaves(tree: Any, fn: Any) -> Any:
    """Apply ``fn`` to the leaves of an Array tree; keep dict nesting."""
    if isinstance(tree, Mapping):
        return {key: _tree_map_leaves(value, fn) for key, value in tree.items()}
    return fn(tree)


def _writable_rows(array: Array) -> np.ndarray:
    """Writable ``[full_size (+ padding), B, ...]`` view of ``array``'s rows."""
    start = array.full
    rows = array.full_size + array.padding
    return as_strided(start, shape=(rows,) + start.shape[1:], strides=start.strides)


def _write_rows(tree: Any, contents: Any) -> None:
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            _write_rows(value, contents[key])
        return
    # Writable view of the same rows the read-only view spans.
    start = tree.full
    view = as_strided(
        start, shape=(len(contents),) + start.shape[1:], strides=start.strides
    )
    view[...] = contents
