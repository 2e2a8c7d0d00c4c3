"""Writing torch files so that a crash never leaves a half-written one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from parllel.checkpoints.files import atomic_write


def atomic_save(path: str | os.PathLike[str], obj: Any) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (temp file, fsync, replace).

    Args:
        path: the final file; its directory must exist.
        obj: anything ``torch.save`` accepts.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    return atomic_write(path, lambda file: torch.save(obj, file))
