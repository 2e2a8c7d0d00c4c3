"""Errors of replay buffers (:mod:`parllel.replays`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = ["ReplayError"]


class ReplayError(ParllelError, RuntimeError):
    """A replay buffer cannot do what was asked (e.g. sample before it holds enough)."""
