"""Checks applied to values written into Arrays (dtype safety, shape errors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ArrayClosedError, DtypeError, ShapeError

_CAN_CAST: dict[tuple[np.dtype, np.dtype], bool] = {}
_NUMERIC_KINDS = "biufc"


def _where(path: str) -> str:
    return f" at leaf {path!r}" if path else ""


def can_cast(source: np.dtype, target: np.dtype) -> bool:
    """Memoized ``np.can_cast(source, target, "same_kind")``."""
    key = (source, target)
    result = _CAN_CAST.get(key)
    if result is None:
        result = _CAN_CAST[key] = bool(np.can_cast(source, target, "same_kind"))
    return result


def check_value_dtype(value: Any, dtype: np.dtype, path: str = "") -> Any:
    """Return ``value`` (as an ndarray if it was a list) if it casts safely to ``dtype``.

    Python scalars follow numpy's rules for their kind: a ``float`` needs a
    floating target, an ``int`` a numeric one (or bool for 0 and 1), a ``bool``
    anything numeric. Arrays and numpy scalars must cast with ``same_kind``
    (so float64 into float32 is fine, float into int is not).

    Raises:
        TreeStructureError: ``value`` is None.
        DtypeError: the cast would change the kind of the data.
    """
    kind = dtype.kind
    vtype = type(value)
    if vtype is float:
        if kind in "fc":
            return value
    elif vtype is bool:
        if kind in _NUMERIC_KINDS:
            return value
    elif vtype is int:
        if kind in "iufc" or (kind == "b" and value in (0, 1)):
            return value
    else:
        vdtype = getattr(value, "dtype", None)
        if vdtype is None:
            if value is None:
                from parllel.errors import TreeStructureError

                raise TreeStructureError(f"cannot write None{_where(path)}")
            value = np.asarray(value)
            vdtype = value.dtype
        if vdtype is dtype or can_cast(vdtype, dtype):
            return value
        raise DtypeError(
            f"cannot write values of dtype {vdtype} into an array of dtype {dtype}"
            f"{_where(path)} without changing their kind; cast explicitly"
        )
    raise DtypeError(
        f"cannot write a Python {vtype.__name__} ({value!r}) into an array of dtype "
        f"{dtype}{_where(path)}"
    )


def shape_error(value: Any, target: Any, path: str, cause: Exception) -> ShapeError:
    """Build the ShapeError for a failed write of ``value`` into ``target``."""
    vshape = np.shape(value)
    tshape = np.shape(target)
    return ShapeError(
        f"cannot write a value of shape {vshape} into a slot of shape {tshape}"
        f"{_where(path)} ({cause})"
    )


def write_error(
    value: Any, storage: np.ndarray, index: Any, path: str, cause: Exception
) -> ShapeError | ArrayClosedError:
    """The error for a failed write of ``value`` into ``storage[index]``.

    ``storage`` is an Array's storage; a closed Array's storage is read-only
    (see :meth:`parllel.arrays.Array.close`), which gives
    :class:`~parllel.errors.ArrayClosedError`; any other failure is a
    :class:`~parllel.errors.ShapeError`.
    """
    if not storage.flags.writeable:
        return closed_error(f"write{_where(path)}")
    return shape_error(value, storage[index], path, cause)


def closed_error(what: str) -> ArrayClosedError:
    """ArrayClosedError for an attempt to ``what`` (e.g. "write at leaf 'reward'")."""
    return ArrayClosedError(
        f"cannot {what}: the Array was closed (close() released it; its last "
        "contents stay readable); allocate a new buffer"
    )
