"""Files a crash never leaves half-written, and the checkpoint file format.

A checkpoint file is a plain pickle of a nested structure. The tensors of a
learning library are not pickled as the library would: each one the
library's :class:`~parllel.backends.Backend` owns is stored as a
persistent id ``(backend name, portable value)``, the portable value being
numpy arrays and Python values. So a state of numpy arrays (a JAX
algorithm's, after ``jax.device_get``) is written and read without torch or
JAX; torch tensors are read back through the torch backend, onto the device
asked for (``device="cpu"`` by default, so a GPU run's checkpoint loads on a
machine without one). Reading unpickles: load only files you trust.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from parllel.backends import Backend, backend_named, loaded_backends

__all__ = ["atomic_write", "read_state", "write_state"]


def _fsync_directory(directory: Path) -> None:
    """Persist a rename on POSIX; a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any]
) -> Path:
    """Call ``write(file)`` on a temporary file, fsync it, then move it over ``path``.

    A crash at any moment leaves either the old file or the new one.

    Args:
        path: the final file; its directory must exist.
        write: writes the content into the binary file it is given.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    handle, temp_name = tempfile.mkstemp(
        prefix=f".{path.stem}_", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path


class _StatePickler(pickle.Pickler):
    """Pickles the tensors a loaded backend owns as portable persistent ids."""

    def __init__(self, file: IO[bytes], backends: Sequence[Backend]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.backends = backends

    def persistent_id(self, obj: Any) -> Any:
        for backend in self.backends:
            if backend.owns(obj):
                return (backend.name, backend.to_portable(obj))
        return None


class _StateUnpickler(pickle.Unpickler):
    """Rebuilds the persistent ids of :class:`_StatePickler` through their backend."""

    def __init__(self, file: IO[bytes], device: str | None) -> None:
        super().__init__(file)
        self.device = device

    def persistent_load(self, pid: Any) -> Any:
        name, portable = pid
        return backend_named(name).from_portable(portable, self.device)


def write_state(file: IO[bytes], state: Any) -> None:
    """Pickle ``state`` into ``file``, every backend tensor in portable form."""
    backends = loaded_backends()
    if backends:
        _StatePickler(file, backends).dump(state)
    else:
        pickle.dump(state, file, protocol=pickle.HIGHEST_PROTOCOL)


def read_state(file: IO[bytes], device: str | None = "cpu") -> Any:
    """Unpickle what :func:`write_state` wrote; tensors go to ``device``
    (None: the devices they were saved from)."""
    return _StateUnpickler(file, device).load()
