"""Bookkeeping over a replay tree of full-size rotating Arrays.

Each batch lands in the ``[T, B]`` window of the full-size Arrays (copied in
by :meth:`ReplayStorage.record_batch`, which then rotates the tree); sampling
reads the stored rows in place. At most ``N - 1`` steps per env are stored
intact, and final observations live in a fixed-capacity table: the row
layout and what happens when the table is full are in docs/replays.md
("Capacity and the wrap-around", "Final observations and memory").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel import fields
from parllel._warnings import warn_at_caller
from parllel.arrays import Array
from parllel.errors import ConfigError, ParllelWarning, ReplayError
from parllel.frame_stacks.replay import FrameStack
from parllel.replays.copying import copy_pairs, window
from parllel.replays.final_observations import (
    FinalObservations,
    final_capacity,
    map_leaves,
)
from parllel.replays.rows import (
    ROW_FIELDS,
    address,
    check_final_leaves,
    check_leaf,
    rows_view,
    writable_rows,
)
from parllel.tree import ArrayDict, tree_items, tree_map

__all__ = ["ReplayStorage", "ROW_FIELDS"]


class ReplayStorage:
    """Which rows of a full-size replay tree hold intact transitions.

    Shared by the replays; a *position* is ``row * B + env`` of one stored step.

    Example:
        >>> storage = ReplayStorage(tree)   # tree leaves: Array((T, B), full_size=N)
        >>> # ... sampler fills the window ...
        >>> storage.record_batch()          # then rotate the tree before the next batch
        >>> storage.num_transitions
        T * B

    Args:
        tree: an ArrayDict whose ``OBSERVATION`` (padding >= 1), ``ACTION``,
            ``REWARD``, ``TERMINATED`` and ``TRUNCATED`` leaves are full-size
            Arrays of one ``(T, B)`` and ``full_size``, plus a ``[T, B]``
            ``FINAL_OBSERVATION`` slot. Other fields are ignored.
        final_observation_capacity: entries of the final-observation table; at
            least ``min(T, N - 1) * B``.
        frame_stack: ``k`` to store one frame per step of ``k``-frame stacks.

    Raises:
        ConfigError: a field is missing or a leaf does not fit.
    """

    def __init__(
        self,
        tree: ArrayDict,
        final_observation_capacity: int | None = None,
        frame_stack: int | None = None,
    ) -> None:
        missing = [name for name in fields.REPLAY_FIELDS if name not in tree]
        if missing:
            raise ConfigError(
                f"the replay tree lacks the fields {missing}; it needs {list(fields.REPLAY_FIELDS)}"
            )
        leaves = [
            (f"{name}.{path}" if path else name, leaf)
            for name in fields.REPLAY_FIELDS
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
            check_leaf(path, leaf, first)
        check_final_leaves(tree[fields.OBSERVATION], tree[fields.FINAL_OBSERVATION])
        if self.full_size < 2:
            raise ConfigError("full_size must be at least 2 to store a transition")
        self.frames = None if frame_stack is None else FrameStack(frame_stack)
        # oldest stored steps per env kept only as the history of later stacks
        self.history = 0 if self.frames is None else self.frames.history
        if self.frames is not None and not isinstance(tree[fields.OBSERVATION], Array):
            raise ConfigError(
                "frame_stack needs the observation to be one Array of frames "
                "(dict observations are not supported)"
            )
        if self.full_size - 1 <= self.history:
            raise ConfigError(
                f"full_size {self.full_size} keeps no sampleable step with "
                f"frame_stack={frame_stack}: it must exceed frame_stack"
            )
        self.tree = tree
        self.capacity = self.full_size - 1  # steps per env (docs/replays.md)
        self._leaves = leaves
        self._row_leaves = [
            (path, leaf)
            for path, leaf in leaves
            if path.split(".")[0] != fields.FINAL_OBSERVATION
        ]
        self._window_leaf = first
        self._window_rows = rows_view(first, self.full_size)
        # [N (+1), B, ...] read-only views over every full-size row
        self.rows = {
            name: map_leaves(
                tree[name],
                lambda leaf, name=name: rows_view(
                    leaf, self.full_size + (name == fields.OBSERVATION)
                ),
            )
            for name in ROW_FIELDS
        }
        final_slot = tree[fields.FINAL_OBSERVATION]
        entry_bytes = sum(
            leaf.dtype.itemsize * int(np.prod(leaf.feature_shape))
            for _, leaf in tree_items(final_slot)
        )
        capacity = final_capacity(
            final_observation_capacity,
            self.capacity * self.num_envs,
            min(self.batch_length, self.capacity) * self.num_envs,
            entry_bytes,
        )
        self.final_observations = FinalObservations(
            final_slot, capacity, self.full_size, self.num_envs
        )
        self.cursor = 0  # row where the next recorded window starts
        self.size = 0  # intact stored steps per env
        self.steps_recorded = 0  # steps per env recorded since construction
        self.steps_dropped_early = 0  # per env, for a full final-observation table
        self._copy_source: Any = None  # sample tree last copied from
        self._copy_pairs: list[tuple[Array, Array, bool]] = []
        self._final_sources: list[Array] = []  # the sample tree's final observation
        self.episode_break = False  # set on resume: the envs were reset
        self._warned_overflow = False

    @property
    def nbytes(self) -> int:
        """Bytes of the replay tree's fields it uses plus the final-observation table."""
        arrays = sum(leaf.nbytes for _, leaf in self._leaves)
        return arrays + self.final_observations.nbytes

    # -- recording ---------------------------------------------------------
    def window_start(self, leaf: Array | None = None) -> int:
        """Full-size row where ``leaf``'s (default: the observation's) window starts."""
        leaf = self._window_leaf if leaf is None else leaf
        base = rows_view(leaf, 1)
        row_stride = base.strides[0]
        return (address(leaf.to_ndarray()) - address(base)) // row_stride

    def record_batch(self, batch: Mapping[str, Any] | None = None) -> int:
        """Declare a batch stored; return the number of new transitions.

        ``batch=None`` (zero-copy): the sampler wrote into this tree's window; call
        once per batch, before the tree is rotated. ``batch=sample_tree`` (copy):
        the sampler's window is copied in, recorded, and this tree rotated. Either
        way the batch's final observations go into the final-observation table.

        Raises:
            ReplayError: the window is not where the next batch belongs (a batch
                recorded twice, or the tree rotated without one).
            ConfigError: ``batch`` does not match the replay tree.
        """
        source = None if batch is self.tree else batch  # None: zero-copy
        copying = source is not None
        if self.frames is not None and source is None:
            raise ReplayError(
                f"a frame_stack={self.frames.k} replay copies each batch from the "
                "sampler's tree of stacks: call record_batch(sample_tree)"
            )
        if source is not None:
            self._write_batch(source)
            sources = self._final_sources
        else:
            sources = [
                leaf for _, leaf in tree_items(self.tree[fields.FINAL_OBSERVATION])
            ]
        if self.size == 0:
            self.cursor = self.window_start()
        # copying, this replay alone rotates its tree: one leaf speaks for all
        for path, leaf in self._row_leaves[:1] if copying else self._row_leaves:
            start = self.window_start(leaf)
            if start != self.cursor:
                raise ReplayError(
                    f"the window of {path!r} starts at row {start}, but the replay "
                    f"expects the next batch at row {self.cursor}: call record_batch() "
                    "exactly once per collected batch, before rotating the tree"
                )
        window_start = self.cursor
        self.cursor = (self.cursor + self.batch_length) % self.full_size
        self.size = min(self.size + self.batch_length, self.capacity)
        self.steps_recorded += self.batch_length
        self._store_final_observations(window_start, sources)
        if copying:
            self.tree.rotate()
        return self.batch_length * self.num_envs

    def _write_batch(self, batch: Mapping[str, Any]) -> None:
        """Copy ``batch``'s window into this tree's window (see :meth:`record_batch`)."""
        if self._copy_source is not batch:
            pairs = copy_pairs(self._leaves, batch, self.batch_length, self.frames)
            final = [
                path.split(".")[0] == fields.FINAL_OBSERVATION
                for path, _ in self._leaves
            ]
            self._copy_pairs = [pair for pair, f in zip(pairs, final) if not f]
            self._final_sources = [pair[0] for pair, f in zip(pairs, final) if f]
            self._copy_source = batch
        if self.episode_break and self.size:
            self._cut_episodes()
        self.episode_break = False
        T = self.batch_length
        if self.frames is not None:
            self._check_stacks(batch)
        for source, target, rows in self._copy_pairs:
            values = window(source, rows, T)
            if rows and self.frames is not None:
                values = values[:, :, -1]  # the newest frame of each stack
            np.copyto(window(target, rows, T), values)

    def _check_stacks(self, batch: Mapping[str, Any]) -> None:
        """Check the batch's stacks roll one frame per step (frame_stack replays)."""
        assert self.frames is not None
        envs = np.arange(self.num_envs)
        # the window's first observation starts an episode where the previous
        # stored step ended (or was cut at a resume); unknown in an empty replay
        starts = (
            self.starts(np.full(self.num_envs, self.cursor), envs)
            if self.size
            else np.zeros(self.num_envs, bool)
        )
        self.frames.check_sample_tree(batch, self.batch_length, starts)

    def starts(self, rows: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """Bool: the observation at ``(rows, envs)`` begins an episode (the step
        before it ended; only meaningful for rows after the oldest stored one)."""
        before = (rows - 1) % self.full_size
        return (
            self.rows[fields.TERMINATED][before, envs]
            | self.rows[fields.TRUNCATED][before, envs]
        )

    def _store_final_observations(self, start: int, sources: list[Array]) -> None:
        """Move the ended episodes' final observations of the window at ``start``
        into the table (the window's old entries are forgotten first)."""
        rows = (start + np.arange(self.batch_length)) % self.full_size
        self.final_observations.forget_rows(rows)
        ended = self.rows[fields.TERMINATED][rows] | self.rows[fields.TRUNCATED][rows]
        stored = (rows - self.oldest_row) % self.full_size < self.size
        t_index, envs = np.nonzero(ended & stored[:, None])
        if len(t_index):
            values = [source.to_ndarray()[t_index, envs] for source in sources]
            if self.frames is not None:
                values = [value[:, -1] for value in values]  # the newest frame
            self.insert_final_observations(rows[t_index], envs, values)

    def insert_final_observations(
        self, rows: np.ndarray, envs: np.ndarray, values: list[np.ndarray]
    ) -> None:
        """Put final observations of stored steps ``(rows, envs)`` in the table.

        ``values``: one ``[n, ...]`` array per observation leaf. Where the
        table overwrites an entry still in use, the stored steps up to and
        including its row are dropped early (:attr:`steps_dropped_early`).
        """
        table = self.final_observations
        for lo in range(0, len(rows), table.capacity):
            part = slice(lo, lo + table.capacity)
            lost_rows, _ = table.insert(
                rows[part], envs[part], [v[part] for v in values]
            )
            ages = (lost_rows - self.oldest_row) % self.full_size
            ages = ages[ages < self.size]
            if not ages.size:
                continue
            keep = self.size - int(ages.max()) - 1
            self.steps_dropped_early += self.size - keep
            if not self._warned_overflow:
                warn_at_caller(
                    f"the replay's final-observation table ({table.capacity} entries) "
                    f"is full: dropping the oldest {self.size - keep} steps per env "
                    "early (more episode ends than it was sized for; pass a larger "
                    "final_observation_capacity to keep them)",
                    ParllelWarning,
                )
                self._warned_overflow = True
            self.size = keep

    def _cut_episodes(self) -> None:
        """Truncate the newest stored step where the next batch starts a new episode.

        After a resume the sampler resets its envs, so the next window's first
        observation is a reset observation, not the next observation of the
        newest stored step. Before it is overwritten, that true next
        observation becomes the step's final observation and the step is
        marked truncated (it still bootstraps from it).
        """
        newest = (self.cursor - 1) % self.full_size
        ended = (
            self.rows[fields.TERMINATED][newest] | self.rows[fields.TRUNCATED][newest]
        )
        open_envs = np.flatnonzero(~ended)
        if not open_envs.size:
            return
        writable_rows(self.tree[fields.TRUNCATED])[newest, open_envs] = True
        values = [
            leaf.to_ndarray()[0, open_envs]
            for _, leaf in tree_items(self.tree[fields.OBSERVATION])
        ]
        self.insert_final_observations(
            np.full(open_envs.size, newest), open_envs, values
        )

    def final_observation(self, rows: np.ndarray, envs: np.ndarray) -> Any:
        """Final observations of stored steps ``(rows, envs)`` that ended an episode.

        Raises:
            ReplayError: one of the steps has none (it did not end an episode).
        """
        return self.final_observations.lookup(rows, envs)

    # -- reading -----------------------------------------------------------
    def observations(self, rows: np.ndarray, envs: np.ndarray) -> Any:
        """The observations at ``(rows, envs)``; stacks rebuilt from the frames
        of a ``frame_stack`` replay (rows after the ``history`` oldest ones).

        Row ``N`` is the trailing bootstrap row (docs/replays.md).
        """
        if self.frames is None:
            return tree_map(
                lambda leaf: leaf[rows, envs], self.rows[fields.OBSERVATION]
            )
        frames = self.rows[fields.OBSERVATION]
        return self.frames.stacks(frames, self.starts, rows, envs, self.full_size)

    # -- positions ---------------------------------------------------------
    @property
    def num_transitions(self) -> int:
        """Intact transitions offered for sampling, over all envs (the oldest
        ``history`` steps per env of a ``frame_stack`` replay are not)."""
        return max(self.size - self.history, 0) * self.num_envs

    @property
    def oldest_row(self) -> int:
        """Row of the oldest intact step."""
        return (self.cursor - self.size) % self.full_size

    def stored_rows(self) -> np.ndarray:
        """Rows of the stored steps, oldest first."""
        return (self.oldest_row + np.arange(self.size)) % self.full_size

    def rows_envs(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split flat positions ``row * B + env`` into ``(rows, envs)``."""
        return np.divmod(np.asarray(positions, dtype=np.int64), self.num_envs)

    def positions_from_age(self, ages: np.ndarray) -> np.ndarray:
        """Positions of ``ages`` in ``[0, num_transitions)`` (0 = oldest offered
        row, env 0)."""
        offsets, envs = np.divmod(np.asarray(ages, dtype=np.int64), self.num_envs)
        rows = (self.oldest_row + self.history + offsets) % self.full_size
        return rows * self.num_envs + envs

    def steps_available(self, rows: np.ndarray) -> np.ndarray:
        """Stored steps from each row to the newest one, inclusive."""
        return self.size - (rows - self.oldest_row) % self.full_size

    def is_stored(self, positions: np.ndarray) -> np.ndarray:
        """Bool mask: which positions hold intact transitions offered now."""
        rows, _ = self.rows_envs(positions)
        age = (rows - self.oldest_row) % self.full_size
        return (age < self.size) & (age >= self.history) & (np.asarray(positions) >= 0)

    def new_window_positions(self) -> np.ndarray:
        """Positions of the most recently recorded window."""
        start = (self.cursor - self.batch_length) % self.full_size
        rows = np.arange(start, start + self.batch_length)
        return (rows[:, None] * self.num_envs + np.arange(self.num_envs)).ravel()

    # -- checkpoints -------------------------------------------------------
    def ended_steps(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, envs)`` of the stored steps that ended an episode, oldest first."""
        rows = self.stored_rows()
        ended = self.rows[fields.TERMINATED][rows] | self.rows[fields.TRUNCATED][rows]
        ages, envs = np.nonzero(ended)
        return rows[ages], envs
