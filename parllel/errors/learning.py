"""Errors of the torch layer (:mod:`parllel.torch`): losses, policy export and
host-device transfers."""

from __future__ import annotations

from parllel.errors.base import (
    ConfigError,
    NonFiniteError,
    ParllelError,
    ParllelWarning,
)

__all__ = [
    "HandlerClosedError",
    "NonFiniteLossError",
    "PageLockError",
    "PolicyExportError",
    "PolicyFileError",
    "PolicyNotFoundError",
    "SeedRunStoppedWarning",
]


class NonFiniteLossError(NonFiniteError):
    """An algorithm's loss or gradient norm is NaN or infinite.

    Raised before the optimizer step, so the weights are those of the last
    finite update (and no checkpoint of this update is written).

    Attributes:
        terms: names of the non-finite loss terms / gradient norms.
    """

    def __init__(self, message: str, terms: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.terms = terms


class SeedRunStoppedWarning(ParllelWarning):
    """One run of a seed axis stopped (e.g. a non-finite loss); the message
    names its seed, and the other runs train on."""


class PolicyExportError(ConfigError):
    """A policy cannot be exported: how to rebuild it is unknown (no recorded
    architecture, a custom activation or space), or its parts do not fit."""


class PolicyFileError(ParllelError, ValueError):
    """A policy file (or the spec of a run's checkpoints) cannot be read: it is
    damaged, not a parllel policy, of a newer format, or needs a builder that
    is not registered."""


class PolicyNotFoundError(PolicyFileError, FileNotFoundError):
    """No policy file at a path, or a run directory with neither an exported
    policy nor a checkpoint it can be loaded from."""


class HandlerClosedError(ParllelError, RuntimeError):
    """A handler (or its transfer) was used after ``close()``, which unlocked
    its page-locked memory: build a new handler."""


class PageLockError(ParllelError, RuntimeError):
    """The CUDA runtime refused to unregister page-locked memory."""
