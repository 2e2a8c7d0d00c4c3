"""gymnasium's batched info dicts, read the way cages read one env's info.

Every entry is an array over envs with a boolean mask ``_key`` saying which
envs have it (nested dicts alike; EnvPool leaves the masks out). In
``SAME_STEP`` mode a finished env's top-level entries are its reset info, its
last step's are under ``final_info`` and its last observation under
``final_obs``. :func:`info_row` is one env's info, :func:`write_info_slots`
writes the kept keys into a cage's info slots, :class:`StepInfos` splits a
step's infos into each env's step and reset info.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from parllel.arrays import Array
from parllel.cages.env_info import write_info_value

__all__ = ["FINAL_KEYS", "StepInfos", "info_row", "write_info_slots"]


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
