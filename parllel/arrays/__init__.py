"""Preallocated batch arrays in local or shared memory (no torch needed).

See :class:`Array` for indexing, padding and rotation semantics and
:class:`SharedSegment` for the ownership rules of shared memory.
"""

from parllel.arrays.array import STORAGE_KINDS, Array, PaddedView, Storage
from parllel.arrays.fast_writer import FastWriter, WriteTarget, compile_fast_writer
from parllel.arrays.shared_memory import (
    SharedSegment,
    list_segments,
    remove_dead_owner_segments,
)
from parllel.arrays.views import (
    NotSharedError,
    ViewDescriptor,
    attach_view,
    describe_view,
)
from parllel.arrays.writing import check_value_dtype

__all__ = [
    "Array",
    "FastWriter",
    "WriteTarget",
    "compile_fast_writer",
    "NotSharedError",
    "ViewDescriptor",
    "attach_view",
    "describe_view",
    "PaddedView",
    "SharedSegment",
    "Storage",
    "STORAGE_KINDS",
    "check_value_dtype",
    "list_segments",
    "remove_dead_owner_segments",
]
