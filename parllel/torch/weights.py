"""SharedWeights: versioned model weights in shared memory, one publisher, many readers.

The learner publishes a model's state into one of two shared buffers and
bumps a version counter; a reader in another process copies the newest
version into its own modules. Reads are never torn, and readers poll rather
than wait on a notification, so a killed reader never blocks the publisher.
How: docs/async.md ("Shared weights").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from parllel.arrays import Array
from parllel.cages.child_processes import start_context
from parllel.errors import ConfigError

_PUBLISHED, _WRITING = 0, 1
_ALIGN = 64  # bytes: every tensor starts on a cache line
# a reader waiting for a version sleeps this long between looks, doubling
_FIRST_NAP_SECONDS, _LAST_NAP_SECONDS = 5e-5, 1e-3


@dataclass(frozen=True)
class TensorSlot:
    """Where one named tensor lives in a weights buffer."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype string
    offset: int
    nbytes: int


def agent_modules(agent: Any) -> dict[str, nn.Module]:
    """The modules that make up an agent's policy: the agent itself if it is an
    ``nn.Module``, else its ``nn.Module`` attributes by name (e.g. ``model``;
    ``actor`` and ``critic`` of a SAC agent)."""
    if isinstance(agent, nn.Module):
        return {"agent": agent}
    modules = {
        name: value
        for name, value in sorted(getattr(agent, "__dict__", {}).items())
        if isinstance(value, nn.Module)
    }
    if not modules:
        raise ConfigError(
            f"{type(agent).__name__} has no nn.Module attribute to share; pass "
            "the modules explicitly (modules={'model': ...})"
        )
    return modules


def module_tensors(modules: Mapping[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``modules``, keyed ``"<module>.<state-dict key>"``."""
    return {
        f"{prefix}.{key}": tensor
        for prefix, module in modules.items()
        for key, tensor in module.state_dict(keep_vars=True).items()
    }


def _numpy_dtype(name: str, tensor: torch.Tensor) -> np.dtype:
    try:
        return torch.empty(0, dtype=tensor.dtype).numpy().dtype
    except TypeError:
        raise ConfigError(
            f"tensor {name!r} has dtype {tensor.dtype}, which has no numpy "
            "equivalent to share it through"
        ) from None


class SharedWeights:
    """Two shared byte buffers of a state dict's tensors plus a version counter.

    Version 0 holds the tensors given at construction; each :meth:`publish`
    adds one. Pass the object to the reading process as a process argument
    (its lock travels only at process start).

    Args:
        tensors: named tensors (e.g. :func:`module_tensors`), any device.
        start_method: start method of the reading processes (default: the
            cages' default, forkserver where available).

    Example:
        >>> weights = SharedWeights(module_tensors({"model": model}))
        >>> weights.publish(module_tensors({"model": model}))   # learner: 1
        >>> weights.read_into(module_tensors({"model": copy}))  # reader: 1
    """

    def __init__(
        self, tensors: Mapping[str, torch.Tensor], start_method: str | None = None
    ) -> None:
        slots, offset = [], 0
        for name, tensor in tensors.items():
            dtype = _numpy_dtype(name, tensor)
            nbytes = tensor.numel() * dtype.itemsize
            slots.append(
                TensorSlot(name, tuple(tensor.shape), dtype.str, offset, nbytes)
            )
            offset += -(-nbytes // _ALIGN) * _ALIGN
        self.slots = tuple(slots)
        self.nbytes = offset
        self._lock = start_context(start_method).Lock()
        self._header = Array((2,), dtype=np.int64, storage="shared")
        self._buffers = Array((2, max(offset, 1)), dtype=np.uint8, storage="shared")
        self._views: list[list[torch.Tensor]] | None = None
        self._write(0, tensors)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_views"] = None
        return state

    def _buffer_views(self) -> list[list[torch.Tensor]]:
        """Per buffer, one tensor view per slot (built once per process)."""
        if self._views is None:
            rows = self._buffers.to_ndarray()
            self._views = [
                [
                    torch.from_numpy(
                        rows[b, s.offset : s.offset + s.nbytes]
                        .view(np.dtype(s.dtype))
                        .reshape(s.shape)
                    )
                    for s in self.slots
                ]
                for b in range(2)
            ]
        return self._views

    def _targets(self, tensors: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        names = [s.name for s in self.slots]
        if list(tensors) != names:
            missing = sorted(set(names) - set(tensors))
            extra = sorted(set(tensors) - set(names))
            raise ConfigError(
                f"the tensors do not match the shared weights' layout (missing "
                f"{missing}, unexpected {extra}, or another order)"
            )
        for slot, tensor in zip(self.slots, tensors.values()):
            if tuple(tensor.shape) != slot.shape:
                raise ConfigError(
                    f"tensor {slot.name!r} has shape {tuple(tensor.shape)}, the "
                    f"shared weights hold {slot.shape}"
                )
        return list(tensors.values())

    def _header_word(self, index: int) -> int:
        with self._lock:
            return int(self._header.to_ndarray()[index])

    @property
    def version(self) -> int:
        """The newest published version."""
        return self._header_word(_PUBLISHED)

    def _write(self, version: int, tensors: Mapping[str, torch.Tensor]) -> None:
        sources = self._targets(tensors)
        header = self._header.to_ndarray()
        with self._lock:
            header[_WRITING] = version
        with torch.no_grad():
            for view, source in zip(self._buffer_views()[version % 2], sources):
                view.copy_(source.detach())
        with self._lock:
            header[_PUBLISHED] = version

    def publish(self, tensors: Mapping[str, torch.Tensor]) -> int:
        """Publish ``tensors`` (the layout given at construction) as the next
        version; return it. One publishing process only."""
        version = self.version + 1
        self._write(version, tensors)
        return version

    def read_into(
        self, tensors: Mapping[str, torch.Tensor], newer_than: int = -1
    ) -> int:
        """Copy the newest version into ``tensors`` (in place) and return it.

        Nothing is copied if the newest version is not above ``newer_than``
        (the version the caller holds); the return value is then that newest
        version.
        """
        targets = self._targets(tensors)
        views = self._buffer_views()
        while True:
            version = self.version
            if version <= newer_than:
                return version
            with torch.no_grad():
                for target, view in zip(targets, views[version % 2]):
                    target.copy_(view)
            if self._header_word(_WRITING) <= version + 1:
                return version  # no publish began over the copied buffer

    def wait_for_version(
        self,
        version: int,
        check_alive: Callable[[], None] | None = None,
        poll_seconds: float = 0.1,
    ) -> int:
        """Block until ``version`` is published; return the newest version.

        Looks at the version every 50 µs at first, then (doubling) every
        1 ms. ``check_alive()`` runs every ``poll_seconds`` while waiting and
        may raise to stop (e.g. when the publisher's process is gone).
        """
        nap = _FIRST_NAP_SECONDS
        deadline = time.monotonic() + poll_seconds
        while True:
            newest = self.version
            if newest >= version:
                return newest
            time.sleep(nap)
            nap = min(2 * nap, _LAST_NAP_SECONDS)
            if time.monotonic() >= deadline:
                if check_alive is not None:
                    check_alive()
                deadline = time.monotonic() + poll_seconds

    def close(self) -> None:
        """Free the shared memory (in the creating process; idempotent)."""
        self._views = None
        self._header.close()
        self._buffers.close()
