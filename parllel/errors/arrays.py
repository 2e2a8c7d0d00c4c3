"""Errors of arrays and trees (:mod:`parllel.arrays`, :mod:`parllel.tree`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = [
    "ArrayClosedError",
    "DtypeError",
    "ShapeError",
    "TreeStructureError",
]


class ShapeError(ParllelError, ValueError):
    """A value's shape does not fit the array slot it is written to."""


class DtypeError(ParllelError, TypeError):
    """A value's dtype cannot be cast safely to the array's dtype."""


class TreeStructureError(ParllelError, KeyError):
    """A written value has missing, extra or ``None`` leaves.

    The message names the leaf path (e.g. ``observation.pixels``).
    """

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class ArrayClosedError(ParllelError, RuntimeError):
    """An array whose shared memory was released was used again (or a
    handler's transfer whose page-locked memory ``close()`` unlocked)."""
