"""A fake CUDA runtime that enforces the driver's rules for page-locked memory.

:class:`FakeCudart` is a :class:`~parllel.torch.page_locks.Cudart` whose
calls follow what CUDA enforces, so that tests on a CPU see the defects a
real GPU would show:

- ``host_register`` of a range overlapping a registered one fails with 712
  (cudaErrorHostMemoryAlreadyRegistered); ``fail_next`` makes the next
  registration fail with any code;
- ``host_unregister`` of a pointer no registration starts at fails with 713
  (cudaErrorHostMemoryNotRegistered);
- a failing call leaves its error pending until ``get_last_error`` reads it:
  the next copy raises it, as torch's check after a kernel launch does;
- a non-blocking copy into page-locked host memory is deferred until an event
  of this fake (or ``device_synchronize``) waits for it, so a missing wait
  leaves stale data; a copy into unlocked memory is synchronous;
- a copy to the device (an input, :func:`~parllel.torch.transfer._to_device`)
  is never deferred: on a GPU the kernels that read it run after it in stream
  order. On the CPU the fake device's memory is host memory, which may share
  a page with a locked buffer (whole pages are registered), so deferring by
  address alone would let the agent read an input before it lands;
- unregistering memory that a deferred copy still writes is recorded in
  ``violations`` (a real device would write into unlocked pages).

``install(monkeypatch)`` routes parllel's copies through the fake and makes
its registry the process's; :meth:`FakeCudart.transfer` builds the CUDA
path's :class:`~parllel.torch.transfer.Transfer` on the CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from parllel.torch import page_locks, transfer
from parllel.torch.page_locks import PageLocks
from parllel.torch.transfer import Transfer

ALREADY_REGISTERED = 712
NOT_REGISTERED = 713


class FakeCudaError(RuntimeError):
    """A pending CUDA error raised by the next device call."""


class FakeCudart:
    """CUDA's rules for registering host memory and copying (module docstring)."""

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}  # pointer -> size
        self.calls: list[tuple[str, int, int]] = []
        self.log: list[str] = []  # "copy", "record", "wait", "sync"
        self.last_error = 0
        self.fail_next = 0
        self.pending: list[tuple[torch.Tensor, Callable[[], None]]] = []
        self.violations: list[str] = []
        self.locks = PageLocks(self)

    # -- the Cudart protocol ----------------------------------------------------
    def host_register(self, pointer: int, size: int) -> int:
        """Register ``[pointer, pointer + size)`` unless it overlaps a range."""
        code = self.fail_next
        self.fail_next = 0
        end = pointer + size
        if not code and any(
            start < end and pointer < start + length
            for start, length in self.registered.items()
        ):
            code = ALREADY_REGISTERED
        if code:
            self.last_error = code
            return code
        self.registered[pointer] = size
        self.calls.append(("register", pointer, size))
        return 0

    def host_unregister(self, pointer: int) -> int:
        """Unregister the range registered at ``pointer``."""
        if pointer not in self.registered:
            self.last_error = NOT_REGISTERED
            return NOT_REGISTERED
        size = self.registered.pop(pointer)
        for out, _ in self.pending:
            if _overlaps(out, pointer, size):
                self.violations.append(
                    f"unregistered {pointer:#x} with a copy into it in flight"
                )
        self.calls.append(("unregister", pointer, size))
        return 0

    def get_last_error(self) -> int:
        """Read and clear the pending error."""
        code, self.last_error = self.last_error, 0
        return code

    def device_synchronize(self) -> None:
        """Finish every deferred copy."""
        self.log.append("sync")
        self._finish()

    # -- the device ---------------------------------------------------------------
    def copy(
        self,
        out: torch.Tensor,
        value: torch.Tensor,
        non_blocking: bool,
        to_device: bool = False,
    ) -> None:
        """``out.copy_(value)`` as the device would run it (module docstring);
        ``to_device``: ``out`` is device memory (stream-ordered, never deferred)."""
        self.log.append("copy")
        if self.last_error:
            code = self.get_last_error()
            raise FakeCudaError(f"CUDA error {code} (pending from an earlier call)")
        if non_blocking and not to_device and self.is_locked(out):
            snapshot = value.clone()  # what the device holds when the copy is issued
            self.pending.append((out, lambda: out.copy_(snapshot)))
        else:
            out.copy_(value)

    def to_device(self, leaf: Any, device: torch.device) -> Any:
        """``transfer._to_device`` on the fake device: a fresh device tensor
        and one non-blocking copy into it, stream-ordered (module docstring)."""
        if not isinstance(leaf, torch.Tensor):
            return leaf
        out = torch.empty_like(leaf, device=device)
        self.copy(out, leaf, non_blocking=True, to_device=True)
        return out

    def is_locked(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor``'s memory lies in a registered range."""
        start = tensor.data_ptr()
        last = start + tensor.numel() * tensor.element_size() - 1
        return all(
            any(
                pointer <= byte < pointer + size
                for pointer, size in self.registered.items()
            )
            for byte in (start, last)
        )

    def registered_ranges(self) -> list[tuple[int, int]]:
        """The registered ``(start, end)`` ranges, sorted."""
        return sorted((p, p + size) for p, size in self.registered.items())

    def _finish(self) -> None:
        pending, self.pending = self.pending, []
        for _, run in pending:
            run()

    def event(self) -> FakeEvent:
        """An event whose ``synchronize`` waits for the copies issued so far."""
        return FakeEvent(self)

    # -- wiring -------------------------------------------------------------------
    def install(self, monkeypatch: Any) -> FakeCudart:
        """Route parllel's copies through this fake and make its registry
        the process's (until the test ends)."""
        monkeypatch.setattr(transfer, "_copy_leaf", self.copy)
        monkeypatch.setattr(transfer, "_to_device", self.to_device)
        monkeypatch.setattr(page_locks, "_process_locks", (_pid(), self.locks))
        return self

    def transfer(self, **kwargs: Any) -> Transfer:
        """The CUDA path's Transfer on the CPU: inputs copied, memory locked
        (through the process's registry unless ``locks`` is given)."""
        kwargs.setdefault("event", self.event())
        return Transfer("cpu", copy_inputs=True, pin_memory=True, **kwargs)


class FakeEvent:
    """``torch.cuda.Event`` of a :class:`FakeCudart`."""

    def __init__(self, cudart: FakeCudart) -> None:
        self.cudart = cudart

    def record(self, stream: Any = None) -> None:
        """Mark the copies issued so far."""
        self.cudart.log.append("record")

    def synchronize(self) -> None:
        """Wait for them."""
        self.cudart.log.append("wait")
        self.cudart._finish()


def _overlaps(tensor: torch.Tensor, pointer: int, size: int) -> bool:
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    return start < pointer + size and pointer < end


def _pid() -> int:
    return os.getpid()
