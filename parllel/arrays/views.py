"""Describe a numpy view of shared memory so another process can rebuild it.

A :class:`ViewDescriptor` is a few numbers (segment name, byte offset, shape,
strides, dtype): a worker process rebuilds the same view of the same memory
from it, without pickling any data. Cages use this to tell workers where to
write each step's results, once per distinct slot, instead of sending arrays.
"""

from __future__ import annotations

import mmap
import os
import weakref
from typing import NamedTuple

import numpy as np

from parllel.arrays.shared_memory import SharedSegment, segment_path
from parllel.errors import ArrayClosedError, ConfigError

# id(mmap) -> (name, size, owner pid, start address); an entry is dropped when
# its mmap is garbage collected (so ids are never confused after reuse)
_REGISTRY: dict[int, tuple[str, int, int, int]] = {}


class ViewDescriptor(NamedTuple):
    """Where a numpy view lies in a shared segment; see :func:`describe_view`."""

    segment: str
    segment_size: int
    owner_pid: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


def register_segment(segment: SharedSegment, root: np.ndarray) -> None:
    """Record that ``root`` (a view starting at byte 0 of ``segment``) maps it."""
    key = id(segment.buffer)
    if key in _REGISTRY:
        return
    _REGISTRY[key] = (
        segment.name,
        segment.size,
        segment.owner_pid,
        root.__array_interface__["data"][0],
    )
    weakref.finalize(segment.buffer, _REGISTRY.pop, key, None)


def view_address(view: np.ndarray) -> int:
    """Address of the first element of ``view``."""
    return view.__array_interface__["data"][0]


def describe_view(view: np.ndarray) -> ViewDescriptor:
    """Describe ``view`` (any numpy view of a shared Array) for another process.

    Raises:
        ConfigError: ``view`` is not backed by a parllel shared segment.
        ArrayClosedError: the segment was released (its Array was closed).
    """
    base = view
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    entry = _REGISTRY.get(id(base)) if isinstance(base, mmap.mmap) else None
    if entry is None:
        raise ConfigError(
            f"this array (shape {view.shape}, dtype {view.dtype}) is not in shared "
            "memory; worker processes can only write into buffers allocated with "
            "storage='shared'"
        )
    name, size, owner_pid, start = entry
    if not os.path.exists(segment_path(name)):
        raise ArrayClosedError(
            f"this view (shape {view.shape}, dtype {view.dtype}) lies in shared memory "
            "that was released (its Array was closed); another process cannot "
            "attach it"
        )
    return ViewDescriptor(
        name,
        size,
        owner_pid,
        view_address(view) - start,
        view.shape,
        view.strides,
        view.dtype.str,
    )


def attach_view(descriptor: ViewDescriptor) -> np.ndarray:
    """Rebuild the view a :class:`ViewDescriptor` describes (attaching its segment)."""
    segment = SharedSegment.attach(
        descriptor.segment, descriptor.segment_size, descriptor.owner_pid
    )
    return np.ndarray(
        descriptor.shape,
        dtype=np.dtype(descriptor.dtype),
        buffer=segment.buffer,
        offset=descriptor.offset,
        strides=descriptor.strides,
    )
