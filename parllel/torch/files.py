"""Writing torch files so that a crash never leaves a half-written one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def _fsync_directory(directory: Path) -> None:
    """Persist a rename on POSIX; a no-op where directories cannot be opened."""
    with contextlib.suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def atomic_save(path: str | os.PathLike[str], obj: Any) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (temp file, fsync, replace).

    Args:
        path: the final file; its directory must exist.
        obj: anything ``torch.save`` accepts.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    handle, temp_name = tempfile.mkstemp(
        prefix=f".{path.stem}_", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    return path
