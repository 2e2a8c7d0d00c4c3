"""Host-device transfers of sample-tree slots: page-locked, non-blocking, one sync.

The sampler's buffers are numpy arrays in (shared) host memory. With a CUDA
agent, :class:`Transfer` page-locks the memory under them in place
(``cudaHostRegister``, once per buffer; no staging copy, workers keep writing
straight into it), copies a step's inputs to the device with one
``non_blocking`` copy per leaf, copies the outputs back the same way, and
waits once, on an event recorded after the last copy, before anything on the
host reads them. On the CPU the inputs are used in place (zero-copy), the
outputs are copied and the (no-op) event is still recorded and waited on:
the code path is the same, so tests on a machine without CUDA exercise it.

Why register instead of a pinned staging tree: a staging tree costs one more
host copy per leaf per step (1.8 MB per step for 64 Atari envs) and a second
tree to keep in step; registering costs one call per buffer at the first
step and an unregister at :meth:`Transfer.close`. The registry holds the
registered arrays, so their memory stays mapped until it is unregistered.
"""

from __future__ import annotations

import mmap
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from parllel.agents.numpy_handler import OUTPUT_RULES
from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.tree import tree_items, tree_map
from parllel.tree.writing import write_nested

PAGE = mmap.PAGESIZE
CUDA_HOST_REGISTER_PORTABLE = 1


def _cuda_register(pointer: int, size: int) -> int:
    return int(
        torch.cuda.cudart().cudaHostRegister(pointer, size, CUDA_HOST_REGISTER_PORTABLE)
    )


def _cuda_unregister(pointer: int) -> int:
    return int(torch.cuda.cudart().cudaHostUnregister(pointer))


def root_array(array: np.ndarray) -> np.ndarray:
    """The ndarray that owns ``array``'s memory (the last ndarray ``.base``)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _uncovered(
    lo: int, hi: int, ranges: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Parts of ``[lo, hi)`` outside the sorted, disjoint ``ranges``."""
    pieces = []
    for start, end in ranges:
        if end <= lo or start >= hi:
            continue
        if start > lo:
            pieces.append((lo, start))
        lo = max(lo, end)
    if lo < hi:
        pieces.append((lo, hi))
    return pieces


def _unregister_all(
    ranges: list[tuple[int, int]],
    roots: list[np.ndarray],
    unregister: Callable[[int], int],
) -> None:
    for start, _ in ranges:
        unregister(start)
    ranges.clear()  # the memory may be unmapped from here on
    roots.clear()


class PinnedMemory:
    """Page-locks the host memory under numpy arrays, each page once.

    :meth:`pin` registers the pages of an array's owner (its root
    ndarray, e.g. a whole shared-memory segment) that are not registered
    yet, and holds the owner, so that its memory stays mapped while
    registered; :meth:`close` (or garbage collection) unregisters them all.
    ``register(pointer, size)`` and ``unregister(pointer)`` return a CUDA
    error code (0: success); tests pass fakes.
    """

    def __init__(
        self,
        register: Callable[[int, int], int] = _cuda_register,
        unregister: Callable[[int], int] = _cuda_unregister,
    ) -> None:
        self._register = register
        self.ranges: list[tuple[int, int]] = []  # sorted, disjoint, page-aligned
        self._roots: list[np.ndarray] = []  # keeps the registered memory mapped
        self._finalizer = weakref.finalize(
            self, _unregister_all, self.ranges, self._roots, unregister
        )
        self._finalizer.atexit = False  # the driver releases it with the process

    @property
    def nbytes(self) -> int:
        """Bytes registered so far."""
        return sum(end - start for start, end in self.ranges)

    def pin(self, array: np.ndarray) -> None:
        """Register the pages under ``array``'s owner that are not yet registered.

        Raises:
            ConfigError: the CUDA runtime refused (e.g. the memlock limit).
        """
        root = root_array(array)
        if root.nbytes == 0:
            return
        pointer = root.__array_interface__["data"][0]
        lo = pointer // PAGE * PAGE
        hi = -(-(pointer + root.nbytes) // PAGE) * PAGE
        pieces = _uncovered(lo, hi, self.ranges)
        if not pieces:
            return
        self._roots.append(root)
        for start, end in pieces:
            code = self._register(start, end - start)
            if code != 0:
                raise ConfigError(
                    f"page-locking {end - start} bytes of sample-tree memory for "
                    f"non-blocking copies failed (CUDA error {code}): raise the "
                    "locked-memory limit (ulimit -l) or build the handler with "
                    "TorchHandler(..., pin_memory=False)"
                )
            self.ranges.append((start, end))
            self.ranges.sort()

    def pin_tree(self, tree: Any) -> None:
        """:meth:`pin` every ndarray (or Array) leaf of ``tree``."""
        for _, leaf in tree_items(tree):
            if isinstance(leaf, Array):
                leaf = leaf.to_ndarray()
            if isinstance(leaf, np.ndarray):
                self.pin(leaf)

    def close(self) -> None:
        """Unregister every registered range (idempotent)."""
        self._finalizer()


class HostEvent:
    """CPU stand-in for ``torch.cuda.Event``: CPU copies finish when they return."""

    def record(self, stream: Any = None) -> None:
        """Nothing to record: CPU copies are done when they return."""

    def synchronize(self) -> None:
        """Nothing to wait for."""


def make_event(device: torch.device) -> Any:
    """An event to wait on the copies to or from ``device``."""
    return torch.cuda.Event() if device.type == "cuda" else HostEvent()


def record_and_wait(event: Any, device: torch.device) -> None:
    """Record ``event`` on ``device``'s current stream and wait for it."""
    if device.type == "cuda":
        event.record(torch.cuda.current_stream(device))
    else:
        event.record()
    event.synchronize()


def _copy_leaf(out: torch.Tensor, value: torch.Tensor, non_blocking: bool) -> None:
    out.copy_(value, non_blocking=non_blocking)


def copy_into(out: Any, value: Any, non_blocking: bool = False) -> None:
    """Copy tensor ``value`` (or a tree) into the tensor views ``out``, leaf by leaf.

    The one tree writer (:func:`~parllel.tree.writing.write_nested`) with the
    agent-output rules of :func:`~parllel.agents.numpy_handler.write_outputs`:
    a node keyed ``"0"``, ``"1"``, ... also takes a tuple (``Tuple`` actions).
    """
    write_nested(
        out,
        value,
        lambda leaf, item, path: _copy_leaf(leaf, item, non_blocking),
        OUTPUT_RULES,
    )


def _to_device(leaf: Any, device: torch.device) -> Any:
    if not isinstance(leaf, torch.Tensor):
        return leaf
    out = torch.empty_like(leaf, device=device)
    _copy_leaf(out, leaf, True)
    return out


class Transfer:
    """Moves a handler's inputs to its device and its outputs back.

    One copy per leaf and direction per step (never per env), all
    ``non_blocking``, and one :meth:`wait` per step: an event recorded after
    the last copy, synchronized before the host (or a worker) reads an
    output slot. Inputs are read by the device in stream order, so they need
    no wait of their own; the wait after the outputs also covers them.

    Args:
        device: where the agent runs.
        pin_memory: page-lock the host buffers the handler sees (default:
            on a CUDA device).
        copy_inputs: copy inputs to the device (default: unless the device
            is the CPU, where the agent reads the buffers in place). True on
            the CPU runs the CUDA path's copies, for tests.
        event: what :meth:`wait` records and synchronizes (default: a
            ``torch.cuda.Event`` on CUDA, else a :class:`HostEvent`).
        pinned: the registry of page-locked memory (default: one that
            registers with the CUDA runtime).
    """

    def __init__(
        self,
        device: torch.device | str,
        *,
        pin_memory: bool | None = None,
        copy_inputs: bool | None = None,
        event: Any = None,
        pinned: PinnedMemory | None = None,
    ) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        self.copy_inputs = cuda if copy_inputs is None else bool(copy_inputs)
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)
        self.pinned = pinned if pinned is not None else PinnedMemory()
        self.event = make_event(self.device) if event is None else event

    def pin(self, tree: Any) -> None:
        """Page-lock the memory under ``tree``'s leaves (if ``pin_memory``)."""
        if self.pin_memory:
            self.pinned.pin_tree(tree)

    def to_device(self, tensors: Any) -> Any:
        """``tensors`` on the device: one non-blocking copy per leaf (or the
        tensors themselves when inputs are not copied)."""
        if not self.copy_inputs or tensors is None:
            return tensors
        return tree_map(lambda leaf: _to_device(leaf, self.device), tensors)

    def to_host(self, out: Any, value: Any) -> None:
        """Copy ``value`` into the host views ``out``, one non-blocking copy
        per leaf; call :meth:`wait` before reading ``out``."""
        copy_into(out, value, non_blocking=True)

    def wait(self) -> None:
        """Wait until every copy issued so far has finished."""
        record_and_wait(self.event, self.device)

    def close(self) -> None:
        """Unregister the page-locked memory (idempotent)."""
        self.pinned.close()


def batch_to_device(batch: Any, device: torch.device | str | None) -> Any:
    """A learner's batch (tensor tree) on ``device``.

    One non-blocking copy per leaf (true DMA from page-locked memory, e.g. a
    sample tree a CUDA handler registered), then one wait, so the sampler
    may overwrite the batch as soon as this returns. Leaves already on
    ``device`` are returned as they are.
    """
    if device is None:
        return batch
    device = torch.device(device)
    moved = tree_map(lambda leaf: _moved(leaf, device), batch)
    record_and_wait(make_event(device), device)
    return moved


def _moved(leaf: Any, device: torch.device) -> Any:
    if not isinstance(leaf, torch.Tensor):
        return leaf
    if leaf.device.type == device.type and device.index in (None, leaf.device.index):
        return leaf
    return _to_device(leaf, device)
