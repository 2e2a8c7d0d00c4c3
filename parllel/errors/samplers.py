"""Errors of samplers (:mod:`parllel.samplers`): sample checks, the tree ring, the background sampler."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = [
    "BackgroundSamplerError",
    "PolicyLagError",
    "TreeRingError",
]


class TreeRingError(ParllelError, RuntimeError):
    """A :class:`~parllel.samplers.tree_ring.TreeRing` was used out of turn (e.g. two
    ``begin_write`` without ``end_write``), or was closed while (or before)
    waiting on it (as is the background sampler after ``close()``)."""


class BackgroundSamplerError(ParllelError, RuntimeError):
    """The background sampler's process raised, or exited without reporting
    an error (more often than ``max_restarts`` allow).

    Attributes:
        worker_traceback: the formatted traceback from the background process.
        exitcode: the process's exit code when it died (negative: killed by
            that signal); None when it raised.
    """

    def __init__(
        self, message: str, worker_traceback: str = "", exitcode: int | None = None
    ) -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback
        self.exitcode = exitcode


class PolicyLagError(ParllelError, RuntimeError):
    """A batch was collected by a policy older than ``max_lag`` versions allow."""
