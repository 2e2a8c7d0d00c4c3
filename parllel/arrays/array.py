"""The Array: a preallocated batch buffer with padding, rotation and shared storage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from parllel.arrays.indexing import LeadingIndexer
from parllel.arrays.shared_memory import SharedSegment
from parllel.arrays.views import register_segment
from parllel.arrays.writing import (
    check_value_dtype,
    closed_error,
    write_error,
)
from parllel.errors import ArrayClosedError, ConfigError

Storage = Literal["local", "shared"]
STORAGE_KINDS = ("local", "shared")


class Array:
    """A numpy-compatible batch buffer, allocated once, local or shared.

    Shape is ``batch_shape + feature_shape`` (time first). Indexing reads like
    numpy; writing checks dtype (``same_kind``) and shape, then writes in place.
    ``padding=P`` adds ``P`` rows on each side (``array[T]`` is the bootstrap
    row, ``array.padded[-1]`` the row before 0), :meth:`rotate` starts the next
    batch, ``full_size`` makes a rotating replay buffer and ``storage="shared"``
    puts the data in OS shared memory (see docs/arrays.md).

    Example:
        >>> obs = Array(batch_shape=(4, 2), feature_shape=(3,), dtype=np.float32,
        ...             storage="shared", padding=1)
        >>> obs[0, 1] = np.ones(3, np.float32)
        >>> obs[4].shape  # the bootstrap row, index T
        (2, 3)
    """

    def __init__(
        self,
        batch_shape: Sequence[int],
        feature_shape: Sequence[int] = (),
        dtype: Any = np.float32,
        *,
        storage: Storage = "local",
        padding: int = 0,
        full_size: int | None = None,
    ) -> None:
        batch_shape = tuple(int(n) for n in batch_shape)
        feature_shape = tuple(int(n) for n in feature_shape)
        if not batch_shape or any(n < 1 for n in batch_shape):
            raise ConfigError(
                f"batch_shape must be non-empty and positive, got {batch_shape}"
            )
        if any(n < 0 for n in feature_shape):
            raise ConfigError(
                f"feature_shape must be non-negative, got {feature_shape}"
            )
        if storage not in STORAGE_KINDS:
            raise ConfigError(
                f"storage must be one of {STORAGE_KINDS}, got {storage!r}"
            )
        padding = int(padding)
        if padding < 0:
            raise ConfigError(f"padding must be >= 0, got {padding}")
        length = batch_shape[0]
        full_size = length if full_size is None else int(full_size)
        if full_size < length or full_size % length:
            raise ConfigError(
                f"full_size ({full_size}) must be a multiple of the batch length ({length})"
            )
        if padding > length:
            raise ConfigError(
                f"padding ({padding}) cannot exceed the batch length ({length})"
            )
        self.dtype = np.dtype(dtype)
        self.batch_shape = batch_shape
        self.feature_shape = feature_shape
        self.storage = storage
        self.padding = padding
        self.full_size = full_size
        storage_shape = (full_size + 2 * padding,) + batch_shape[1:] + feature_shape
        self._segment: SharedSegment | None = None
        if storage == "shared":
            nbytes = int(np.prod(storage_shape, dtype=np.int64)) * self.dtype.itemsize
            self._segment = SharedSegment.create(nbytes)
            self._storage = _view_segment(self._segment, self.dtype, storage_shape)
        else:
            self._storage = np.zeros(storage_shape, dtype=self.dtype)
        self._offset = 0  # start of the window within the full-size rows
        self._rotations = 0
        self._update_indexers()

    # -- geometry ----------------------------------------------------------
    def _update_indexers(self) -> None:
        base = self.padding + self._offset
        self._base = base
        self._length = self.batch_shape[0]
        self._indexer = LeadingIndexer(
            base, self.batch_shape[0], self.padding, self.ndim, True
        )
        self._padded_indexer = LeadingIndexer(
            base, self.batch_shape[0], self.padding, self.ndim, False
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """``batch_shape + feature_shape`` (padding excluded)."""
        return self.batch_shape + self.feature_shape

    @property
    def ndim(self) -> int:
        """Number of dimensions of :attr:`shape`."""
        return len(self.batch_shape) + len(self.feature_shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the whole storage, padding and full size included."""
        return self._storage.nbytes

    def __len__(self) -> int:
        return self.batch_shape[0]

    # -- reading and writing -----------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        if type(index) is tuple and index and type(index[0]) is int:
            return self._storage[(self._indexer.row(index[0]),) + index[1:]]
        if type(index) is int:
            return self._storage[self._indexer.row(index)]
        return self._storage[self._indexer.translate(index)]

    def __setitem__(self, index: Any, value: Any) -> None:
        storage_index: int | tuple
        if type(index) is tuple and index and type(index[0]) is int:
            storage_index = (self._indexer.row(index[0]),) + index[1:]
        elif type(index) is int:
            storage_index = self._indexer.row(index)
        else:
            storage_index = self._indexer.translate(index)
        self._write(storage_index, value, "")

    def write(
        self, index: Any, value: Any, path: str = "", cache: dict | None = None
    ) -> None:
        """``array[index] = value``, with errors naming the leaf ``path``.

        For containers writing one index into many Arrays (a tree's
        ``tree[index] = value``). ``value`` is checked for dtype-kind safety, then a
        :class:`~parllel.errors.ShapeError` or
        :class:`~parllel.errors.ArrayClosedError` naming ``path``.

        Args:
            index: an index in batch coordinates, as for ``array[index]``.
            value: what to write.
            path: the leaf's name in messages (e.g. ``"observation.pos"``).
            cache: a dict shared by the Arrays of one multi-leaf write; it
                keeps the translated index per window geometry, so Arrays
                alike translate an index expression only once.
        """
        storage_index: tuple | None
        if type(index) is tuple and index and type(index[0]) is int:
            t = index[0]  # the common ``[t, b, ...]``: inline translation
            if 0 <= t < self._length:
                storage_index = (self._base + t,) + index[1:]
            else:
                storage_index = (self._indexer.row(t),) + index[1:]
        elif cache is None:
            storage_index = self._indexer.translate(index)
        else:
            geometry = (self._base, self._length, self.padding, self.ndim)
            storage_index = cache.get(geometry)
            if storage_index is None:
                storage_index = cache[geometry] = self._indexer.translate(index)
        if value is None or getattr(value, "dtype", None) is not self.dtype:
            value = check_value_dtype(value, self.dtype, path)
        try:
            self._storage[storage_index] = value
        except ValueError as exc:
            raise write_error(value, self._storage, storage_index, path, exc) from None

    def _write(self, storage_index: Any, value: Any, path: str) -> None:
        """Write ``value`` at an already-translated storage index."""
        if isinstance(value, Array):
            value = value.to_ndarray()
        value = check_value_dtype(value, self.dtype, path)
        try:
            self._storage[storage_index] = value
        except ValueError as exc:
            raise write_error(value, self._storage, storage_index, path, exc) from None

    @property
    def padded(self) -> PaddedView:
        """Index in padded coordinates: ``-P..-1`` are the rows before row 0."""
        return PaddedView(self)

    def to_ndarray(self) -> np.ndarray:
        """Zero-copy numpy view of the batch window (``[T, ...]``, no padding)."""
        return self._storage[self._base : self._base + self.batch_shape[0]]

    def padded_ndarray(self) -> np.ndarray:
        """Zero-copy view of the window with its padding (``[P + T + P, ...]``)."""
        p = self.padding
        return self._storage[self._base - p : self._base + self.batch_shape[0] + p]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        view = self.to_ndarray()
        if dtype is not None and np.dtype(dtype) != self.dtype:
            if copy is False:
                raise ValueError("a dtype conversion of an Array cannot be zero-copy")
            return view.astype(dtype)
        return view.copy() if copy else view

    # -- rotation and full size --------------------------------------------
    def rotate(self) -> None:
        """Move the window to the next batch, carrying rows across the boundary.

        Afterwards ``array.padded[-P:P]`` of the new batch holds what
        ``array.padded[T-P:T+P]`` held in the old one. With ``full_size == T``
        this is a copy of ``2P`` rows; with a larger ``full_size`` the window
        slides on (no copy) until it wraps around to the start.
        """
        if not self._storage.flags.writeable:
            raise closed_error("rotate")
        length, p = self.batch_shape[0], self.padding
        self._offset += length
        self._rotations += 1
        if self._offset >= self.full_size:
            self._offset = 0
            if p:
                end = self.full_size + 2 * p
                self._storage[: 2 * p] = self._storage[end - 2 * p : end]
        self._update_indexers()

    @property
    def full(self) -> np.ndarray:
        """View of all full-size rows written so far (up to the current window's end)."""
        written = min(self.full_size, (self._rotations + 1) * self.batch_shape[0])
        return self._storage[self.padding : self.padding + written]

    # -- shared memory -----------------------------------------------------
    @property
    def segment_name(self) -> str | None:
        """Name of the shared-memory segment, or None for local storage."""
        return None if self._segment is None else self._segment.name

    @property
    def closed(self) -> bool:
        """True once :meth:`close` closed this Array (local, or shared and owned)."""
        return not self._storage.flags.writeable

    def close(self) -> None:
        """Close this Array (idempotent); a shared one's owner releases its memory.

        Afterwards the Array refuses writes and :meth:`rotate` with
        :class:`~parllel.errors.ArrayClosedError`, local or shared alike (a
        closed sample tree fails the same way with a serial cage as with a
        process cage); reading still works (the memory lives on while views
        of it exist), and views taken from now on are read-only. Attached
        copies in other processes are unaffected.
        """
        segment = self._segment
        if segment is not None:
            if not segment.is_owner:
                return
            segment.close()
        if self._storage.flags.writeable:
            storage = self._storage.view()
            storage.flags.writeable = False
            self._storage = storage

    def __enter__(self) -> Array:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        if self._segment is None:
            return (_rebuild_local, (self._state(), self._storage))
        if self._segment.closed:
            raise ArrayClosedError(
                f"cannot pickle shared Array: its segment {self._segment.name!r} was closed"
            )
        return (
            _rebuild_shared,
            (
                self._state(),
                self._segment.name,
                self._segment.size,
                self._segment.owner_pid,
            ),
        )

    def _state(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype.str,
            "batch_shape": self.batch_shape,
            "feature_shape": self.feature_shape,
            "storage": self.storage,
            "padding": self.padding,
            "full_size": self.full_size,
            "offset": self._offset,
            "rotations": self._rotations,
        }

    def __repr__(self) -> str:
        extra = f", padding={self.padding}" if self.padding else ""
        if self.full_size != self.batch_shape[0]:
            extra += f", full_size={self.full_size}"
        return f"Array(shape={self.shape}, dtype={self.dtype}, storage={self.storage!r}{extra})"


class PaddedView:
    """``array.padded[...]``: reads and writes in padded coordinates."""

    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def __getitem__(self, index: Any) -> Any:
        return self._array._storage[self._array._padded_indexer.translate(index)]

    def __setitem__(self, index: Any, value: Any) -> None:
        self._array._write(self._array._padded_indexer.translate(index), value, "")


def _view_segment(
    segment: SharedSegment, dtype: np.dtype, shape: tuple[int, ...]
) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    root = np.frombuffer(segment.buffer, dtype=dtype, count=count)
    register_segment(segment, root)
    return root.reshape(shape)


def _restore(array: Array, state: dict[str, Any], storage: np.ndarray) -> Array:
    array.dtype = np.dtype(state["dtype"])
    array.batch_shape = tuple(state["batch_shape"])
    array.feature_shape = tuple(state["feature_shape"])
    array.storage = state["storage"]
    array.padding = state["padding"]
    array.full_size = state["full_size"]
    array._offset = state["offset"]
    array._rotations = state["rotations"]
    array._storage = storage
    array._update_indexers()
    return array


def _rebuild_local(state: dict[str, Any], storage: np.ndarray) -> Array:
    array = Array.__new__(Array)
    array._segment = None
    return _restore(array, state, storage)


def _rebuild_shared(
    state: dict[str, Any], name: str, size: int, owner_pid: int
) -> Array:
    array = Array.__new__(Array)
    segment = SharedSegment.attach(name, size, owner_pid)
    array._segment = segment
    shape = (state["full_size"] + 2 * state["padding"],) + tuple(
        state["batch_shape"][1:]
    )
    shape += tuple(state["feature_shape"])
    return _restore(
        array, state, _view_segment(segment, np.dtype(state["dtype"]), shape)
    )
