"""The compiled writer behind ``tree[t, b] = {...}``, the sampler's hot write.

A sample tree is written once per env step with one dict of fields. A Python
loop over the fields, with its tuple unpacking and index translation, costs as
much as the writes themselves, so :func:`compile_fast_writer` generates
straight-line code for one set of fields: each Array field becomes
``storage[base + t, b] = value[key]`` with the storage and its row offset as
constants, taken from :meth:`Array.write_target <parllel.arrays.Array.write_target>`.

The constants go stale when any Array's window moves (construction,
``rotate()``, unpickling, ``close()``): every such event bumps
:data:`GEOMETRY_EPOCH`, and a :class:`FastWriter` remembers the epoch it was
compiled at, so its owner recompiles when they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from parllel.arrays.writing import check_value_dtype, write_error

GEOMETRY_EPOCH = [0]
"""Bumped whenever any Array's window moves, so cached write targets know they are stale."""

_NO_LIMIT = 1 << 62


class WriteTarget(NamedTuple):
    """Where ``array[t, b] = value`` lands for ``0 <= t < length``: ``storage[base + t, b]``.

    Valid while :data:`GEOMETRY_EPOCH` keeps its value.
    """

    storage: np.ndarray
    """The Array's whole storage (padding and full size included)."""
    base: int
    """Storage row of batch row 0."""
    length: int
    """Rows in the batch window, ``T``."""
    dtype: np.dtype
    """The Array's dtype."""
    plain_types: frozenset[type]
    """Scalar types whose values always write safely into ``dtype`` (no check needed)."""


class FastWriter(NamedTuple):
    """A compiled ``write(value, t, b)`` and when it may be used.

    ``write`` is valid while :data:`GEOMETRY_EPOCH` equals ``epoch``, for an
    int ``0 <= t < min_length`` and a mapping ``value`` of ``n_fields`` keys
    (a missing key raises ``KeyError``; the caller names the mismatch).
    """

    epoch: int
    write: Callable[[Any, int, Any], None]
    n_fields: int
    min_length: int


def compile_fast_writer(
    fields: Sequence[tuple[str, Any]],
    write_other: Callable[[Any, tuple, Any, str], None],
) -> FastWriter:
    """Compile ``write(value, t, b)`` for ``value[key]`` into every field, unrolled.

    Args:
        fields: ``(key, target)`` pairs in order: a :class:`WriteTarget` for an
            Array field (written at ``storage[base + t, b]`` with the same
            checks as ``Array.__setitem__``: dtype-kind safety, then a
            :class:`~parllel.errors.ShapeError` or
            :class:`~parllel.errors.ArrayClosedError` naming the key), or any
            other leaf (a subtree, an ndarray) for ``write_other``.
        write_other: ``write_other(leaf, (t, b), item, key)`` writes the other
            leaves.

    Returns:
        The writer, stamped with the current :data:`GEOMETRY_EPOCH`;
        ``min_length`` is the shortest window of the Array fields, or 0 if some
        field is not an Array (such trees keep the general write path).

    Example:
        >>> from parllel.arrays import Array
        >>> reward = Array((4, 2))
        >>> fast = compile_fast_writer([("reward", reward.write_target())], None)
        >>> fast.write({"reward": 1.0}, 3, 1); float(reward[3, 1])
        1.0
    """
    namespace: dict[str, Any] = {
        "check_value_dtype": check_value_dtype,
        "write_error": write_error,
        "write_other": write_other,
    }
    lines = ["def write(value, t, b):"]
    min_length = _NO_LIMIT
    for i, (key, target) in enumerate(fields):
        name = repr(key)
        lines.append(f"    item = value[{name}]")
        if not isinstance(target, WriteTarget):
            min_length = 0  # general path for trees with other leaves
            namespace[f"leaf{i}"] = target
            lines.append(f"    write_other(leaf{i}, (t, b), item, {name})")
            continue
        min_length = min(min_length, target.length)
        base = target.base
        namespace.update(
            {
                f"s{i}": target.storage,
                f"d{i}": target.dtype,
                f"p{i}": target.plain_types,
            }
        )
        lines += [
            f"    if type(item) not in p{i} and getattr(item, 'dtype', None) is not d{i}:",
            f"        item = check_value_dtype(item, d{i}, {name})",
            "    try:",
            f"        s{i}[{base} + t, b] = item",
            "    except ValueError as exc:",
            f"        raise write_error(item, s{i}, ({base} + t, b), {name}, exc) from None",
        ]
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), namespace)  # noqa: S102 (generated from our own fields)
    return FastWriter(GEOMETRY_EPOCH[0], namespace["write"], len(fields), min_length)
