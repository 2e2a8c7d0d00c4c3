"""Errors of policy files (:mod:`parllel.export`, :mod:`parllel.torch.export`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = ["PolicyFileError"]


class PolicyFileError(ParllelError, ValueError):
    """A policy file (or the spec of a run's checkpoints) is missing or cannot
    be read: it is damaged, not a parllel policy, of a newer format, or needs a
    builder that is not registered."""
