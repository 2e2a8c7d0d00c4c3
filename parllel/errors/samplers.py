"""Errors and warnings of samplers (:mod:`parllel.samplers`): sample checks, the tree ring, the background sampler."""

from __future__ import annotations

from parllel.errors.base import NonFiniteError, ParllelError, ParllelWarning

__all__ = [
    "BackgroundSamplerDiedError",
    "BackgroundSamplerError",
    "BackgroundSamplerRestartWarning",
    "FrameStackError",
    "NonFiniteSampleError",
    "PolicyLagError",
    "TreeRingClosedError",
    "TreeRingError",
]


class NonFiniteSampleError(NonFiniteError):
    """An env produced a NaN or infinite observation or reward (sampler check).

    Attributes:
        field: the sample-tree field (e.g. ``observation`` or ``reward``).
        env_index: global index of the env.
        step: the step of the batch that produced it (-1: a reset observation).
    """

    def __init__(self, message: str, field: str, env_index: int, step: int) -> None:
        super().__init__(message)
        self.field = field
        self.env_index = env_index
        self.step = step


class FrameStackError(ParllelError, ValueError):
    """A sampler storing one frame per step got an observation that is not
    the env's previous stack shifted by one frame (or, at an episode's start,
    its reset frame repeated), so its stack could not be rebuilt bit for bit
    (:mod:`parllel.samplers.frame_stacks`)."""


class TreeRingError(ParllelError, RuntimeError):
    """A :class:`~parllel.samplers.TreeRing` was used out of turn (e.g. two
    ``begin_write`` without ``end_write``)."""


class TreeRingClosedError(TreeRingError):
    """A :class:`~parllel.samplers.TreeRing` was closed while (or before) waiting on it."""


class BackgroundSamplerError(ParllelError, RuntimeError):
    """The background sampler's process raised; carries that process's traceback.

    Attributes:
        worker_traceback: the formatted traceback from the background process.
    """

    def __init__(self, message: str, worker_traceback: str = "") -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback


class BackgroundSamplerDiedError(BackgroundSamplerError):
    """The background sampler's process exited without reporting an error.

    Attributes:
        exitcode: the process's exit code (negative: killed by that signal).
    """

    def __init__(self, message: str, exitcode: int | None) -> None:
        super().__init__(message)
        self.exitcode = exitcode


class PolicyLagError(ParllelError, RuntimeError):
    """A batch was collected by a policy older than ``max_lag`` versions allow."""


class BackgroundSamplerRestartWarning(ParllelWarning):
    """The background sampler's process died and a new one was started in its
    place (``BackgroundSampler(max_restarts=...)``); its envs start from reset."""
