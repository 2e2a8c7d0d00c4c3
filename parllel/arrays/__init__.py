"""Preallocated batch arrays in local or shared memory (no torch needed).

See :class:`Array` for indexing, padding and rotation semantics and
:class:`SharedSegment` for the ownership rules of shared memory.
"""

from parllel.arrays.array import Array

__all__ = [
    "Array",
]
