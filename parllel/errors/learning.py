"""Errors of the torch layer (:mod:`parllel.torch`): losses and policy export."""

from __future__ import annotations

from parllel.errors.base import (
    ConfigError,
    NonFiniteError,
    ParllelError,
)

__all__ = [
    "NonFiniteLossError",
    "PolicyExportError",
    "PolicyFileError",
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


class PolicyExportError(ConfigError):
    """A policy cannot be exported: how to rebuild it is unknown (no recorded
    architecture, a custom activation or space), or its parts do not fit."""


class PolicyFileError(ParllelError, ValueError):
    """A policy file (or the spec of a run's checkpoints) is missing or cannot
    be read: it is damaged, not a parllel policy, of a newer format, or needs a
    builder that is not registered."""
