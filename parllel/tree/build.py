"""Allocate a whole tree of Arrays from one example."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

from parllel.arrays import Array
from parllel.arrays.array import Storage
from parllel.errors import TreeStructureError
from parllel.tree.array_dict import ArrayDict
from parllel.tree.utils import is_namedtuple


class _AllocOptions(TypedDict):
    """The allocation arguments every leaf of one tree shares."""

    storage: Storage
    padding: int
    full_size: int | None


def buffer_from_example(
    example: Any,
    batch_shape: Sequence[int],
    storage: Storage = "local",
    padding: int = 0,
    full_size: int | None = None,
    *,
    _path: str = "",
) -> Any:
    """Allocate Arrays shaped ``batch_shape + example.shape`` for every leaf of ``example``.

    ``example`` may be a numpy scalar or array, a Python scalar, or a nested
    dict / namedtuple / tuple of those (e.g. a gymnasium space's ``sample()``).
    Dtypes are kept (a Python ``float`` becomes float64, ``int`` int64). A
    container example gives an :class:`ArrayDict` (tuples get keys ``"0"``,
    ``"1"``, ...); a leaf example gives one :class:`~parllel.arrays.Array`.

    Example:
        >>> tree = buffer_from_example({"pos": np.zeros(3, np.float32), "id": 0}, (128, 8))
        >>> tree.pos.shape, tree.id.dtype
        ((128, 8, 3), dtype('int64'))

    Raises:
        TreeStructureError: a leaf of the example is None.
    """
    kwargs: _AllocOptions = {
        "storage": storage,
        "padding": padding,
        "full_size": full_size,
    }
    if isinstance(example, Mapping):
        return ArrayDict(
            {
                str(k): buffer_from_example(
                    v, batch_shape, _path=_join(_path, k), **kwargs
                )
                for k, v in example.items()
            }
        )
    if is_namedtuple(example):
        return ArrayDict(
            {
                k: buffer_from_example(v, batch_shape, _path=_join(_path, k), **kwargs)
                for k, v in example._asdict().items()
            }
        )
    if isinstance(example, (tuple, list)):
        return ArrayDict(
            {
                str(i): buffer_from_example(
                    v, batch_shape, _path=_join(_path, i), **kwargs
                )
                for i, v in enumerate(example)
            },
            sequence=True,
        )
    if example is None:
        raise TreeStructureError(f"example leaf {_path or '<root>'!r} is None")
    value = np.asarray(example)
    if value.dtype.kind not in "biufc":
        raise TreeStructureError(
            f"example leaf {_path or '<root>'!r} of type {type(example).__name__} is not "
            "numeric; only numbers, arrays and nested dicts/tuples can be preallocated"
        )
    return Array(batch_shape, value.shape, value.dtype, **kwargs)


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)
