"""Errors and warnings of replay buffers (:mod:`parllel.replays`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError, ParllelWarning

__all__ = ["ReplayCapacityWarning", "ReplayError"]


class ReplayError(ParllelError, RuntimeError):
    """A replay buffer cannot do what was asked (e.g. sample before it holds enough)."""


class ReplayCapacityWarning(ParllelWarning, RuntimeWarning):
    """A replay dropped stored steps early: its final-observation table was full."""
