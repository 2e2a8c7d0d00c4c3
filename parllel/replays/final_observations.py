"""Final observations of ended episodes, kept sparsely beside a replay.

Only a step that ended an episode has a final observation, so a replay does
not keep a full-size ``[N, B, ...]`` copy of the observation for them. The
sampler writes a batch's final observations into a small ``[T, B]`` slot;
when the batch is recorded, the replay copies the few that belong to ended
episodes into a :class:`FinalObservations` table: a fixed-capacity ring of
entries, found by ``(row, env)`` through an ``int32`` index of the stored
rows (4 bytes per stored step, plus 4 per entry).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ConfigError, ReplayError
from parllel.tree import ArrayDict, tree_items, tree_map

__all__ = [
    "FINAL_TABLE_MIN_BYTES",
    "STEPS_PER_FINAL_OBSERVATION",
    "FinalObservations",
    "final_capacity",
    "map_leaves",
]

# Default capacity: one entry per this many stored steps (room for episodes
# that average at least this many steps over the whole replay) ...
STEPS_PER_FINAL_OBSERVATION = 32
# ... and never fewer entries than this many bytes hold, so replays of small
# observations (vectors) get room for every step and never drop one.
FINAL_TABLE_MIN_BYTES = 64 * 2**20


def map_leaves(tree: Any, fn: Any) -> Any:
    """Apply ``fn`` to the leaves of an Array tree; keep (plain) dict nesting.

    The replay's row views, samples and checkpoint contents are plain dicts
    (or one array), whatever the replay tree is made of.
    """
    mapped = tree_map(fn, tree)
    return mapped.to_dict() if isinstance(mapped, ArrayDict) else mapped


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def final_capacity(
    requested: int | None,
    stored_steps: int,
    batch_entries: int,
    entry_bytes: int,
) -> int:
    """Entries of the final-observation table.

    Args:
        requested: the user's ``final_observation_capacity`` or None (default).
        stored_steps: transitions the replay stores at most (``(N - 1) * B``).
        batch_entries: most entries one recorded batch can add
            (``min(T, N - 1) * B``); the table holds at least that many.
        entry_bytes: bytes of one final observation.

    Returns:
        ``requested`` (at most ``stored_steps``), or by default
        ``stored_steps / STEPS_PER_FINAL_OBSERVATION`` entries, at least
        ``batch_entries`` and at least what ``FINAL_TABLE_MIN_BYTES`` holds.

    Raises:
        ConfigError: ``requested`` is not an integer of at least ``batch_entries``.
    """
    if requested is None:
        by_rate = -(-stored_steps // STEPS_PER_FINAL_OBSERVATION)
        by_bytes = FINAL_TABLE_MIN_BYTES // max(entry_bytes, 1)
        return min(stored_steps, max(batch_entries, by_rate, by_bytes))
    if not _is_int(requested) or requested < batch_entries:
        raise ConfigError(
            "final_observation_capacity must be an integer of at least "
            f"min(T, full_size - 1) * B = {batch_entries} (the episode ends one batch "
            f"can hold); got {requested!r}"
        )
    return min(int(requested), stored_steps)


def _index_type(count: int) -> type:
    """The smallest of int32 / int64 that indexes ``count`` items."""
    return np.int32 if count < 2**31 else np.int64


class FinalObservations:
    """A fixed-capacity ring of final observations, found by ``(row, env)``.

    Entries are written in the order steps are recorded; a new entry
    overwrites the oldest one. :meth:`insert` reports the overwritten entries
    that were still current, so the replay can stop offering their steps
    (see :class:`~parllel.replays.ReplayStorage`).

    Example:
        >>> table = FinalObservations(slot_tree, capacity=1024, full_size=N, num_envs=B)
        >>> table.insert(rows, envs, [values])   # one [n, ...] array per leaf
        >>> table.lookup(rows, envs)             # the same values (a tree)

    Args:
        slot: the replay tree's ``FINAL_OBSERVATION`` (an Array or tree of
            them); gives the leaves' feature shapes and dtypes.
        capacity: number of entries.
        full_size: rows of the replay (``N``).
        num_envs: envs per row (``B``).
    """

    def __init__(self, slot: Any, capacity: int, full_size: int, num_envs: int) -> None:
        self.capacity = int(capacity)
        self.observations = map_leaves(
            slot,
            lambda leaf: np.zeros(
                (self.capacity,) + tuple(leaf.feature_shape), leaf.dtype
            ),
        )
        self._leaves = [leaf for _, leaf in tree_items(self.observations)]
        self.num_envs = int(num_envs)
        # slot_of[row, env]: entry of that step's final observation (-1: none)
        self.slot_of: np.ndarray = np.full(
            (full_size, num_envs), -1, _index_type(self.capacity)
        )
        # position_of[entry]: its step's position row * B + env (-1: unused)
        self.position_of: np.ndarray = np.full(
            self.capacity, -1, _index_type(full_size * self.num_envs)
        )
        self.head = 0  # next entry to write (the oldest one once the ring is full)

    @property
    def nbytes(self) -> int:
        """Bytes held: the entries and the index."""
        arrays = [*self._leaves, self.slot_of, self.position_of]
        return sum(array.nbytes for array in arrays)

    def clear(self) -> None:
        """Forget every entry."""
        self.slot_of[...] = -1
        self.position_of[...] = -1
        self.head = 0

    def forget_rows(self, rows: np.ndarray) -> None:
        """Detach the entries of ``rows`` (they are being overwritten by new steps)."""
        self.slot_of[rows] = -1

    def insert(
        self, rows: np.ndarray, envs: np.ndarray, values: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Store final observations of the steps ``(rows[i], envs[i])``.

        Args:
            rows: ``[n]`` full-size rows, ``n <= capacity``.
            envs: ``[n]`` env indices.
            values: one ``[n, ...]`` array per leaf, in tree order.

        Returns:
            ``(rows, envs)`` of the entries overwritten while still current.
        """
        n = len(rows)
        if n > self.capacity:
            raise ReplayError(
                f"internal: {n} final observations at once exceed the table's "
                f"capacity of {self.capacity}"
            )
        slots = (self.head + np.arange(n)) % self.capacity
        used = slots[self.position_of[slots] >= 0]
        old_rows, old_envs = np.divmod(
            self.position_of[used].astype(np.int64), self.num_envs
        )
        current = self.slot_of[old_rows, old_envs] == used
        evicted = (old_rows[current], old_envs[current])
        self.slot_of[evicted] = -1
        for leaf, value in zip(self._leaves, values):
            leaf[slots] = value
        self.position_of[slots] = np.asarray(rows) * self.num_envs + np.asarray(envs)
        self.slot_of[rows, envs] = slots
        self.head = int((self.head + n) % self.capacity)
        return evicted

    def lookup(self, rows: np.ndarray, envs: np.ndarray) -> Any:
        """The final observations of steps ``(rows, envs)`` (a tree of ``[n, ...]``).

        Raises:
            ReplayError: a step has no entry (an internal inconsistency).
        """
        slots = self.slot_of[rows, envs]
        if (slots < 0).any():
            raise ReplayError(
                "internal: a stored step that ended an episode has no final observation"
            )
        return map_leaves(self.observations, lambda leaf: leaf[slots])
