"""Preallocated batch arrays in local or shared memory (no torch needed).

See :class:`Array` for indexing, padding and rotation semantics and
:class:`SharedSegment` for the ownership rules of shared memory.
"""

from parllel.arrays.array import Array
from parllel.arrays.shared_memory import list_segments, remove_dead_owner_segments

__all__ = [
    "Array",
    "list_segments",
    "remove_dead_owner_segments",
]
