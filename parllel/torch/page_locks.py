"""Page-locked host memory: one registry per process, shared by every handler.

``cudaHostRegister`` refuses a range that overlaps one already registered
(error 712), so handlers reading the same buffer share registrations:
:class:`PageLocks` counts each range's users, registers only pages not yet
registered and unregisters a range (after a device synchronize) when its
last user releases it. docs/gpu.md explains the error codes.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from parllel.arrays import Array
from parllel.errors import ConfigError, ParllelError
from parllel.tree import tree_items

PAGE = mmap.PAGESIZE
CUDA_HOST_REGISTER_PORTABLE = 1

# what the codes cudaHostRegister and cudaHostUnregister return mean, and
# their likely causes in parllel
ERROR_MEANINGS: dict[int, tuple[str, str]] = {
    1: (
        "cudaErrorInvalidValue",
        "the range is not valid host memory (unmapped, or a shared segment "
        "whose backing /dev/shm could not supply its pages: check its free "
        "space with `df -h /dev/shm`)",
    ),
    2: (
        "cudaErrorMemoryAllocation",
        "the driver could not lock the pages: a full /dev/shm (shared "
        "segments are allocated as they are first touched; `df -h /dev/shm`) "
        "or a container or virtualized runtime that limits page-locked memory",
    ),
    712: (
        "cudaErrorHostMemoryAlreadyRegistered",
        "part of the range is already page-locked by other code in this "
        "process (cudaHostRegister refuses overlapping ranges; parllel's own "
        "handlers share one registry and never overlap)",
    ),
    713: (
        "cudaErrorHostMemoryNotRegistered",
        "the range was not registered, or was unregistered by other code",
    ),
    801: (
        "cudaErrorNotSupported",
        "this platform does not support page-locking existing memory (some "
        "virtualized runtimes, e.g. gVisor or WSL without it)",
    ),
}


def error_meaning(code: int) -> str:
    """``"<name> (<code>): <likely cause>"`` for a CUDA error code."""
    name, cause = ERROR_MEANINGS.get(code, ("CUDA error", "see the CUDA runtime docs"))
    return f"{name} ({code}): {cause}"


class Cudart(Protocol):
    """The CUDA runtime calls page-locking needs (tests pass a fake)."""

    def host_register(self, pointer: int, size: int) -> int:
        """``cudaHostRegister(pointer, size, portable)``; 0 on success."""
        ...

    def host_unregister(self, pointer: int) -> int:
        """``cudaHostUnregister(pointer)``; 0 on success."""
        ...

    def get_last_error(self) -> int | None:
        """``cudaGetLastError()``: read and clear the pending error (None:
        not readable here)."""
        ...

    def device_synchronize(self) -> None:
        """``cudaDeviceSynchronize()``: wait for every copy in flight."""
        ...


def _loaded_libcudart() -> Any:
    """The CUDA runtime library torch loaded (None if not found): its
    ``cudaGetLastError`` clears the error of this process's runtime."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"):
        try:
            return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
    return None


class TorchCudart:
    """:class:`Cudart` through ``torch.cuda.cudart()`` (cudaGetLastError,
    which torch does not expose, through the runtime library it loaded)."""

    def host_register(self, pointer: int, size: int) -> int:
        """Page-lock ``size`` bytes at ``pointer``."""
        import torch

        cudart = torch.cuda.cudart()
        return int(cudart.cudaHostRegister(pointer, size, CUDA_HOST_REGISTER_PORTABLE))

    def host_unregister(self, pointer: int) -> int:
        """Unlock the range registered at ``pointer``."""
        import torch

        return int(torch.cuda.cudart().cudaHostUnregister(pointer))

    def get_last_error(self) -> int | None:
        """Read and clear the runtime's pending error."""
        library = _loaded_libcudart()
        return None if library is None else int(library.cudaGetLastError())

    def device_synchronize(self) -> None:
        """Wait for the device."""
        import torch

        torch.cuda.synchronize()


def page_span(array: np.ndarray) -> tuple[int, int]:
    """The page-aligned ``[start, end)`` of the bytes ``array`` spans (its own
    extent, not its owner's); empty for an empty array."""
    if array.nbytes == 0:
        return 0, 0
    low, high = np.lib.array_utils.byte_bounds(array)
    return low // PAGE * PAGE, -(-high // PAGE) * PAGE


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


@dataclass
class _Range:
    end: int
    users: int = 0
    owners: dict[int, np.ndarray] = field(default_factory=dict)  # keep it mapped


class PageLock:
    """One user's hold on registered ranges; :meth:`release` gives it up."""

    def __init__(self, registry: PageLocks, starts: list[int]) -> None:
        self._registry = registry
        self.starts = starts  # one entry per hold (a range may appear twice)

    @property
    def released(self) -> bool:
        """Whether :meth:`release` ran."""
        return not self.starts

    def release(self) -> None:
        """Give up the holds (idempotent); ranges left without users are
        unregistered after a device synchronize."""
        starts, self.starts = self.starts, []
        if starts:
            self._registry.release(starts)


class PageLocks:
    """The registry of page-locked ranges of one process, with user counts.

    :meth:`lock` registers the pages under an array that no range covers yet
    and returns a :class:`PageLock` holding every range under the array;
    a range is unregistered when its last holder releases it, after one
    ``device_synchronize``. Ranges stay sorted and disjoint, so the driver
    never sees an overlapping registration from parllel.

    Args:
        cudart: the CUDA runtime (default: :class:`TorchCudart`).
    """

    def __init__(self, cudart: Cudart | None = None) -> None:
        self.cudart: Cudart = cudart if cudart is not None else TorchCudart()
        self._starts: list[int] = []  # sorted
        self._ranges: dict[int, _Range] = {}
        self._lock = threading.RLock()  # a finalizer may release inside lock()

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """Registered ``(start, end)`` ranges, sorted and disjoint."""
        return [(start, self._ranges[start].end) for start in self._starts]

    @property
    def nbytes(self) -> int:
        """Bytes registered."""
        return sum(end - start for start, end in self.ranges)

    def users(self, start: int) -> int:
        """Holders of the range registered at ``start`` (0: not registered)."""
        held = self._ranges.get(start)
        return 0 if held is None else held.users

    def lock(self, array: np.ndarray) -> PageLock:
        """Hold the pages under ``array``, registering those not yet registered.

        Raises:
            ConfigError: the CUDA runtime refused; the message says what the
                code means (its pending error is cleared).
        """
        lo, hi = page_span(array)
        if lo == hi:
            return PageLock(self, [])
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        with self._lock:
            added: list[int] = []
            try:
                for start, end in _uncovered(lo, hi, self.ranges):
                    self._register(start, end)
                    added.append(start)
            except ConfigError:  # no copy has read them: unregister at once
                for start in added:
                    self._forget(start)
                    self.cudart.host_unregister(start)
                raise
            first = max(bisect.bisect_right(self._starts, lo) - 1, 0)
            starts = []
            for start in self._starts[first:]:
                if start >= hi:
                    break
                held = self._ranges[start]
                if held.end > lo:
                    held.users += 1
                    held.owners[id(owner)] = owner
                    starts.append(start)
        return PageLock(self, starts)

    def lock_tree(self, tree: Any) -> PageLock:
        """:meth:`lock` every ndarray (or Array) leaf of ``tree``, as one hold."""
        starts: list[int] = []
        try:
            for _, leaf in tree_items(tree):
                if isinstance(leaf, Array):
                    leaf = leaf.to_ndarray()
                if isinstance(leaf, np.ndarray):
                    starts += self.lock(leaf).starts
        except BaseException:
            self.release(starts)
            raise
        return PageLock(self, starts)

    def _register(self, start: int, end: int) -> None:
        code = self.cudart.host_register(start, end - start)
        if code == 0:
            bisect.insort(self._starts, start)
            self._ranges[start] = _Range(end)
            return
        pending = self.cudart.get_last_error()
        cleared = (
            "CUDA's pending error was cleared"
            if pending is not None
            else "CUDA keeps this error pending (cudaGetLastError was not "
            "reachable): the next CUDA call may raise it, so restart the process"
        )
        raise ConfigError(
            f"page-locking {end - start} bytes of sample-tree memory for "
            f"non-blocking copies failed: {error_meaning(code)}. {cleared}. "
            "Build the handler with TorchHandler(..., pin_memory=False) to copy "
            "from pageable memory instead (docs/gpu.md)"
        )

    def _forget(self, start: int) -> None:
        del self._ranges[start]
        self._starts.remove(start)

    def release(self, starts: list[int]) -> None:
        """Drop one hold per entry of ``starts``; unregister, after a device
        synchronize, the ranges left without holders.

        Raises:
            ParllelError: the runtime refused to unregister a range.
        """
        with self._lock:
            free = []
            for start in starts:
                held = self._ranges[start]
                held.users -= 1
                if held.users == 0:
                    free.append(start)
            if not free:
                return
            self.cudart.device_synchronize()  # no copy may still read them
            failures = []
            for start in free:
                self._forget(start)
                code = self.cudart.host_unregister(start)
                if code != 0:
                    self.cudart.get_last_error()  # not left pending
                    failures.append(f"{start:#x}: {error_meaning(code)}")
        if failures:
            raise ParllelError(
                "unregistering page-locked memory failed at " + "; ".join(failures)
            )


_process_locks: tuple[int, PageLocks] | None = None


def process_page_locks() -> PageLocks:
    """The registry every handler of this process shares (a forked child
    gets its own: its CUDA context is not the parent's)."""
    global _process_locks
    if _process_locks is None or _process_locks[0] != os.getpid():
        _process_locks = (os.getpid(), PageLocks())
    return _process_locks[1]
