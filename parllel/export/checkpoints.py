"""Reading the policy's weights out of a run directory's checkpoints.

The checkpoints are those the runners write with
:func:`parllel.checkpoints.save_checkpoint`: ``checkpoints/checkpoint_<step>.pt``,
with the checkpoint objects' state dicts under ``state["objects"]``; they are
read with :mod:`parllel.checkpoints.checkpoint`, which unpickles: load only
checkpoints you trust.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parllel.checkpoints.checkpoint import (
    checkpoint_step,
    list_checkpoints,
    load_latest_checkpoint,
)
from parllel.errors import CheckpointError, PolicyFileError

__all__ = ["newest_checkpoint_objects", "newest_checkpoint_step"]


def newest_checkpoint_step(run_dir: str | Path) -> int | None:
    """The step of the newest checkpoint file of a run directory, or None."""
    found = list_checkpoints(Path(run_dir) / "checkpoints")
    return checkpoint_step(found[-1]) if found else None


def newest_checkpoint_objects(run_dir: str | Path) -> tuple[Path, int, dict[str, Any]]:
    """The checkpoint objects of the newest readable checkpoint of a run.

    A newer checkpoint that cannot be read is skipped with a
    :class:`~parllel.errors.ParllelWarning`.

    Returns:
        The checkpoint's path, its step and ``state["objects"]``.

    Raises:
        PolicyFileError: if the run has no readable checkpoint.
    """
    directory = Path(run_dir) / "checkpoints"
    try:
        path, state = load_latest_checkpoint(directory)
    except CheckpointError as error:
        raise PolicyFileError(
            f"no readable checkpoint in {directory}: {error}"
        ) from None
    if "objects" not in state:
        raise PolicyFileError(f"{path} holds no checkpoint objects")
    return path, checkpoint_step(path), dict(state["objects"])
