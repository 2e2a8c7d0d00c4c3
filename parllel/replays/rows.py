"""Row views and leaf checks of a replay tree of full-size Arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from parllel import fields
from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.tree import tree_items, tree_map

# the fields kept per full-size row (final observations are kept sparsely)
ROW_FIELDS = fields.REPLAY_FIELDS[:-1]

__all__ = [
    "ROW_FIELDS",
    "address",
    "check_final_leaves",
    "check_leaf",
    "rows_view",
    "writable_rows",
    "write_rows",
]


def address(view: np.ndarray) -> int:
    """Memory address of the first element of ``view``."""
    return view.__array_interface__["data"][0]


def rows_view(array: Array, rows: int) -> np.ndarray:
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


def writable_rows(array: Array) -> np.ndarray:
    """Writable ``[full_size (+ padding), B, ...]`` view of ``array``'s rows."""
    start = array.full
    rows = array.full_size + array.padding
    return as_strided(start, shape=(rows,) + start.shape[1:], strides=start.strides)


def write_rows(tree: Any, contents: Any) -> None:
    """Write saved rows (a tree of ``[rows, B, ...]`` arrays) back from row 0.

    ``contents`` has (at least) the paths of ``tree``, an Array tree.
    """

    def write(array: Array, saved: Any) -> Array:
        # Writable view of the same rows the read-only view spans.
        start = array.full
        view = as_strided(
            start, shape=(len(saved),) + start.shape[1:], strides=start.strides
        )
        view[...] = saved
        return array

    tree_map(write, tree, contents)


def check_leaf(path: str, leaf: Any, first: Array) -> None:
    """Check one replay-tree leaf against the observation's first leaf.

    A row leaf must match its ``(T, B)`` and ``full_size`` (observation
    leaves need padding >= 1); a final-observation leaf only its ``(T, B)``.

    Raises:
        ConfigError: naming the leaf.
    """
    if not isinstance(leaf, Array):
        raise ConfigError(f"replay tree leaf {path!r} is not a parllel Array")
    field = path.split(".")[0]
    if field == fields.FINAL_OBSERVATION:
        if leaf.batch_shape != first.batch_shape:
            raise ConfigError(
                f"replay tree leaf {path!r} has batch_shape {leaf.batch_shape}; "
                f"expected {first.batch_shape} (a [T, B] slot)"
            )
        return
    if leaf.batch_shape != first.batch_shape or leaf.full_size != first.full_size:
        raise ConfigError(
            f"replay tree leaf {path!r} has batch_shape {leaf.batch_shape} and "
            f"full_size {leaf.full_size}; expected {first.batch_shape} and "
            f"{first.full_size}"
        )
    if field == fields.OBSERVATION and leaf.padding < 1:
        raise ConfigError(
            f"replay tree leaf {path!r} needs padding >= 1 (the bootstrap row)"
        )


def check_final_leaves(observation: Any, final: Any) -> None:
    """The final observation must have the observation's leaves, shapes and dtypes.

    Raises:
        ConfigError: listing both.
    """

    def layout(tree: Any) -> dict[str, tuple]:
        return {
            path: (tuple(leaf.feature_shape), np.dtype(leaf.dtype).str)
            for path, leaf in tree_items(tree)
        }

    expected, actual = layout(observation), layout(final)
    if expected != actual:
        raise ConfigError(
            f"the replay tree's {fields.FINAL_OBSERVATION!r} leaves {actual} do not "
            f"match its {fields.OBSERVATION!r} leaves {expected} (feature shape, dtype)"
        )
