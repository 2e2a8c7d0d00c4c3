"""Reading the policy's weights out of a run directory's checkpoints.

The checkpoints are those the runners write with
:func:`parllel.runtime.save_checkpoint`: ``checkpoints/checkpoint_<step>.pt``,
each ``{"parllel_checkpoint": version, "step": step, "state": {...}}`` with
the checkpoint objects' state dicts under ``state["objects"]``. This module
sits below :mod:`parllel.runtime` (which it must not import), so it reads
that layout itself; a test keeps the two in agreement. Checkpoints hold RNG
states and other Python objects: they are read with
``torch.load(weights_only=False)``, so load only checkpoints you trust.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from parllel.errors import CheckpointFallbackWarning, PolicyFileError

__all__ = ["newest_checkpoint_objects", "newest_checkpoint_step"]

_PATTERN = re.compile(r"^checkpoint_(\d+)\.pt$")


def _checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    directory = run_dir / "checkpoints"
    if not directory.is_dir():
        return []
    found = [
        (int(match.group(1)), entry)
        for entry in directory.iterdir()
        if (match := _PATTERN.match(entry.name)) and entry.is_file()
    ]
    return sorted(found)


def newest_checkpoint_step(run_dir: str | Path) -> int | None:
    """The step of the newest checkpoint file of a run directory, or None."""
    found = _checkpoints(Path(run_dir))
    return found[-1][0] if found else None


def newest_checkpoint_objects(run_dir: str | Path) -> tuple[Path, int, dict[str, Any]]:
    """The checkpoint objects of the newest readable checkpoint of a run.

    A newer checkpoint that cannot be read is skipped with a
    :class:`~parllel.errors.CheckpointFallbackWarning`.

    Returns:
        The checkpoint's path, its step and ``state["objects"]``.

    Raises:
        PolicyFileError: if the run has no readable checkpoint.
    """
    candidates = _checkpoints(Path(run_dir))
    errors = []
    for step, path in reversed(candidates):
        try:
            envelope = torch.load(path, map_location="cpu", weights_only=False)
            objects = envelope["state"]["objects"]
        except Exception as error:  # noqa: BLE001 - any damage: try an older one
            errors.append(f"{path.name}: {type(error).__name__}: {error}")
            warnings.warn(
                f"checkpoint {path} is unreadable ({type(error).__name__}: {error}); "
                "trying an older one",
                CheckpointFallbackWarning,
                stacklevel=3,
            )
            continue
        return path, step, dict(objects)
    raise PolicyFileError(
        f"no readable checkpoint in {Path(run_dir) / 'checkpoints'}"
        + "".join(f"\n  {error}" for error in errors)
    )
