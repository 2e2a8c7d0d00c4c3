"""Errors of training runs: run directories, checkpoints, training
loops (:mod:`parllel.checkpoints`, :mod:`parllel.runners`)."""

from __future__ import annotations

from parllel.errors.base import (
    ParllelError,
)

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "RunDirectoryError",
]


class RunDirectoryError(ParllelError, OSError):
    """A run directory is missing, incomplete, or cannot be created."""


class CheckpointError(ParllelError, RuntimeError):
    """A checkpoint cannot be saved, found or read (missing, truncated,
    damaged, not parllel's); the base of the checkpoint errors."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint does not fit what it is loaded into.

    The message names every differing config key or state-dict entry with
    both values (e.g. a parameter's shape in the checkpoint and in the model).
    """
