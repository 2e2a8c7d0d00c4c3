"""Errors and warnings of training runs: run directories, checkpoints, training
loops (:mod:`parllel.runtime`, :mod:`parllel.runners`), logging and the bench tool."""

from __future__ import annotations

from parllel.errors.base import (
    ConfigError,
    NonFiniteError,
    ParllelError,
    ParllelWarning,
)

__all__ = [
    "CheckpointError",
    "CheckpointFallbackWarning",
    "CheckpointMismatchError",
    "CheckpointNotFoundError",
    "CorruptCheckpointError",
    "EnvFactoryError",
    "InterruptIgnoredWarning",
    "MetricError",
    "NonFiniteCheckpointError",
    "RunDirectoryError",
    "ScheduleWarning",
    "TotalStepsChangedWarning",
]


class RunDirectoryError(ParllelError, OSError):
    """A run directory is missing, incomplete, or cannot be created."""


class CheckpointError(ParllelError, RuntimeError):
    """Base class of errors about saving, finding or loading checkpoints."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint exists where one was asked for."""


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint does not fit what it is loaded into.

    The message names every differing config key or state-dict entry with
    both values (e.g. a parameter's shape in the checkpoint and in the model).
    """


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file exists but cannot be read (truncated, damaged, not parllel's)."""


class NonFiniteCheckpointError(NonFiniteError, CheckpointError):
    """A checkpoint was refused: the state holds NaN or infinite tensors."""


class CheckpointFallbackWarning(ParllelWarning):
    """The newest checkpoint was unreadable; an older one was loaded instead."""


class ScheduleWarning(ParllelWarning):
    """Training will run a different number of steps than asked (whole batches)."""


class TotalStepsChangedWarning(ParllelWarning):
    """A run resumes with another ``total_steps`` than its checkpoint's run.

    Schedules that follow training progress (``env_steps / total_steps``,
    e.g. linear learning-rate and clip-range decay) jump at the resume.
    """


class InterruptIgnoredWarning(ParllelWarning):
    """SIGINT is ignored in this process (a background job), so Ctrl-C cannot stop training."""


class MetricError(ParllelError, TypeError):
    """A logged metric is not a real number (or the key is not a string)."""


class EnvFactoryError(ConfigError):
    """A ``MODULE:FACTORY`` reference names no importable callable, or the
    factory raised or returned something that is not an env.

    The message names the reference and what went wrong (e.g. the module that
    did not import, or the factory's exception).
    """
