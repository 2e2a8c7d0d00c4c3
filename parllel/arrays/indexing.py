"""Translate index expressions on an Array's batch window to storage indices.

An :class:`~parllel.arrays.Array` stores its rows in a larger buffer
(padding, the ``T``-row window, padding, and for full-size arrays the rows
the window slides over). Only the leading index is translated, in batch
coordinates (``array[...]``: numpy's meaning, plus ``T .. T + P - 1`` for
the trailing padding) or padded coordinates (``array.padded[...]``: no
wrap-around); every other component goes to numpy unchanged. See
docs/arrays.md ("Padding").
"""

from __future__ import annotations

import operator
from typing import TypeGuard

import numpy as np


def _is_integer(obj: object) -> TypeGuard[int | np.integer]:
    return isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_))


def _count_consumed(components: tuple) -> int:
    """Number of array dimensions the index components consume."""
    count = 0
    for comp in components:
        if comp is None or comp is Ellipsis:
            continue
        if isinstance(comp, np.ndarray) and comp.dtype == np.bool_:
            count += max(comp.ndim, 1)
        else:
            count += 1
    return count


class LeadingIndexer:
    """Maps the leading component of an index onto storage rows.

    Args:
        base: storage row of batch index 0.
        length: ``T``, rows in the batch window.
        padding: ``P``, extra rows on each side.
        ndim: dimensions of the array (batch + feature).
        wrap: True for batch coordinates (negatives count from ``T``), False
            for padded coordinates (negatives are leading padding rows).
    """

    __slots__ = ("base", "length", "padding", "ndim", "wrap")

    def __init__(
        self, base: int, length: int, padding: int, ndim: int, wrap: bool
    ) -> None:
        self.base = base
        self.length = length
        self.padding = padding
        self.ndim = ndim
        self.wrap = wrap

    # -- scalar ------------------------------------------------------------
    def row(self, i: int) -> int:
        """Storage row of leading index ``i`` (bounds-checked)."""
        length, padding = self.length, self.padding
        if self.wrap:
            if -length <= i < 0:
                i += length
            elif not 0 <= i < length + padding:
                raise IndexError(
                    f"index {i} is out of bounds for a batch of {length} rows"
                    + (
                        f" with {padding} padding rows (valid: {-length}..{length + padding - 1}"
                        "; use .padded[...] for rows before 0)"
                        if padding
                        else ""
                    )
                )
        elif not -padding <= i < length + padding:
            raise IndexError(
                f"padded index {i} is out of bounds: valid rows are "
                f"{-padding}..{length + padding - 1}"
            )
        return self.base + i

    # -- slices ------------------------------------------------------------
    def rows_slice(self, s: slice) -> slice:
        """Storage slice for a slice on the leading dimension."""
        step = 1 if s.step is None else operator.index(s.step)
        if step == 0:
            raise ValueError("slice step cannot be zero")
        length, padding = self.length, self.padding
        # Batch coordinates slice exactly like numpy over the T batch rows;
        # padded coordinates span all rows, padding included.
        lo, hi = (0, length) if self.wrap else (-padding, length + padding)
        start = None if s.start is None else operator.index(s.start)
        stop = None if s.stop is None else operator.index(s.stop)
        if self.wrap:
            if start is not None and start < 0:
                start += length
            if stop is not None and stop < 0:
                stop += length
        if step > 0:
            default_start, default_stop = (0, length) if self.wrap else (lo, hi)
            start = default_start if start is None else min(max(start, lo), hi)
            stop = default_stop if stop is None else min(max(stop, lo), hi)
            return slice(self.base + start, self.base + max(stop, start), step)
        default_start = length - 1 if self.wrap else hi - 1
        start = default_start if start is None else min(max(start, lo - 1), hi - 1)
        stop = lo - 1 if stop is None else min(max(stop, lo - 1), hi - 1)
        if start < lo:  # starts before the first row: nothing to take
            return slice(0, 0, 1)
        abs_stop = self.base + stop
        return slice(self.base + start, None if abs_stop < 0 else abs_stop, step)

    # -- arrays ------------------------------------------------------------
    def rows_array(self, idx: np.ndarray) -> np.ndarray:
        """Storage rows for an integer index array on the leading dimension."""
        length, padding = self.length, self.padding
        idx = idx.astype(np.intp, copy=True)
        if self.wrap:
            bad = (idx < -length) | (idx >= length + padding)
            if bad.any():
                raise IndexError(
                    f"index {int(idx[bad].flat[0])} is out of bounds for a batch of "
                    f"{length} rows with {padding} padding rows"
                )
            idx[idx < 0] += length
        else:
            bad = (idx < -padding) | (idx >= length + padding)
            if bad.any():
                raise IndexError(
                    f"padded index {int(idx[bad].flat[0])} is out of bounds"
                )
        idx += self.base
        return idx

    def _component(self, comp: object) -> tuple:
        """Translate one leading component; may expand into several (bool masks)."""
        if _is_integer(comp):
            return (self.row(operator.index(comp)),)
        if isinstance(comp, slice):
            return (self.rows_slice(comp),)
        arr = comp if isinstance(comp, np.ndarray) else np.asarray(comp)
        if arr.dtype == np.bool_:
            if arr.ndim == 0:
                raise IndexError("a scalar boolean index is not supported on an Array")
            if arr.shape[0] != self.length:
                raise IndexError(
                    f"boolean index of length {arr.shape[0]} does not match the "
                    f"batch length {self.length}"
                )
            nonzero = list(np.nonzero(arr))
            nonzero[0] = nonzero[0] + self.base
            return tuple(nonzero)
        if arr.dtype.kind not in "iu":
            raise IndexError(
                "only integers, slices, ellipsis, None and integer or boolean arrays "
                f"are valid indices (got {type(comp).__name__} of dtype {arr.dtype})"
            )
        if arr.ndim == 0:
            return (self.row(int(arr)),)
        return (self.rows_array(arr),)

    def translate(self, index: object) -> tuple:
        """Return the storage index tuple for ``index`` on the batch window."""
        if type(index) is not tuple:
            index = (index,)
        window = slice(self.base, self.base + self.length)
        # skip leading newaxis entries: they add dims but consume none
        pos = 0
        while pos < len(index) and index[pos] is None:
            pos += 1
        if pos == len(index):
            return index + (window,)
        head = index[pos]
        if head is Ellipsis:
            after = index[pos + 1 :]
            if _count_consumed(after) < self.ndim:
                # the ellipsis covers the leading dimension
                return index[:pos] + (window,) + index[pos:]
            # the ellipsis covers nothing: translate the next component
            rest = list(after)
            inner = 0
            while rest[inner] is None:
                inner += 1
            translated = self._component(rest[inner])
            return (
                index[: pos + 1]
                + tuple(rest[:inner])
                + translated
                + tuple(rest[inner + 1 :])
            )
        return index[:pos] + self._component(head) + index[pos + 1 :]
