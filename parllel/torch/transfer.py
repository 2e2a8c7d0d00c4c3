"""Host-device transfers of sample-tree slots: page-locked, non-blocking, one sync.

With a CUDA agent, :class:`Transfer` page-locks the host views it copies in
place (:mod:`parllel.torch.page_locks`), copies each leaf with one
``non_blocking`` copy per direction and waits once per step on an event. On
the CPU the same code path runs (inputs read in place), so tests without
CUDA exercise it. Why registering beats a pinned staging tree: docs/gpu.md
("Page-locked memory and non-blocking copies").
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from parllel.agents.numpy_handler import OUTPUT_RULES
from parllel.errors import ArrayClosedError
from parllel.torch.page_locks import PageLock, PageLocks, process_page_locks
from parllel.tree import tree_map
from parllel.tree.writing import write_nested

PRUNE_HOLDS = 1024  # released holds are dropped from the list past this many


def _release_all(holds: list[PageLock]) -> None:
    """Release every hold (all of them, even if one fails; then re-raise)."""
    failure: Exception | None = None
    for hold in holds:
        try:
            hold.release()
        except Exception as exc:  # noqa: BLE001 - the others are still released
            failure = failure or exc
    holds.clear()
    if failure is not None:
        raise failure


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

    One ``non_blocking`` copy per leaf and direction per step, and one
    :meth:`wait` per step before the host (or a worker) reads an output slot.
    Using it after :meth:`close` raises :class:`~parllel.errors.ArrayClosedError`.

    Args:
        pin_memory: page-lock the host views :meth:`pin` is given (default: on
            CUDA).
        copy_inputs: copy inputs to the device (default: unless on the CPU;
            True on the CPU runs the CUDA path's copies, for tests).
        event: what :meth:`wait` records and synchronizes (default: a CUDA
            event, else a :class:`HostEvent`).
        locks: the registry of page-locked memory (default: the process's).
    """

    def __init__(
        self,
        device: torch.device | str,
        *,
        pin_memory: bool | None = None,
        copy_inputs: bool | None = None,
        event: Any = None,
        locks: PageLocks | None = None,
    ) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        self.copy_inputs = cuda if copy_inputs is None else bool(copy_inputs)
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)
        self.locks = locks if locks is not None else process_page_locks()
        self.event = make_event(self.device) if event is None else event
        self.closed = False
        self._holds: list[PageLock] = []
        self._finalizer = weakref.finalize(self, _release_all, self._holds)
        self._finalizer.atexit = False  # the driver releases it with the process

    @property
    def locked_nbytes(self) -> int:
        """Bytes of the registered ranges this transfer holds."""
        held = {start for hold in self._holds for start in hold.starts}
        return sum(end - start for start, end in self.locks.ranges if start in held)

    def check_open(self) -> None:
        """Raise :class:`~parllel.errors.ArrayClosedError` after :meth:`close`."""
        if self.closed:
            raise ArrayClosedError(
                "this handler was closed (close() unlocked its page-locked "
                "memory): build a new handler to step an agent again"
            )

    def pin(self, tree: Any) -> PageLock | None:
        """Page-lock the memory under ``tree``'s leaves (if ``pin_memory``);
        the returned hold keeps it locked until released (or :meth:`close`)."""
        self.check_open()
        if not self.pin_memory:
            return None
        if len(self._holds) >= PRUNE_HOLDS:
            self._holds[:] = [hold for hold in self._holds if not hold.released]
        hold = self.locks.lock_tree(tree)
        self._holds.append(hold)
        return hold

    def to_device(self, tensors: Any) -> Any:
        """``tensors`` on the device: one non-blocking copy per leaf (or the
        tensors themselves when inputs are not copied)."""
        self.check_open()
        if not self.copy_inputs or tensors is None:
            return tensors
        return tree_map(lambda leaf: _to_device(leaf, self.device), tensors)

    def to_host(self, out: Any, value: Any) -> None:
        """Copy ``value`` into the host views ``out``, one non-blocking copy
        per leaf; call :meth:`wait` before reading ``out``."""
        self.check_open()
        copy_into(out, value, non_blocking=True)

    def wait(self) -> None:
        """Wait until every copy issued so far has finished."""
        record_and_wait(self.event, self.device)

    def close(self) -> None:
        """Release the page-locked memory this transfer holds (idempotent);
        a range is unregistered, after a device synchronize, when no other
        handler holds it."""
        self.closed = True
        self._finalizer()


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
