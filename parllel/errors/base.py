"""The bases, and the errors every layer raises."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "MissingDependencyError",
    "NonFiniteError",
    "ParllelError",
    "ParllelWarning",
]


class ParllelError(Exception):
    """Base class of every error raised by parllel."""


class ParllelWarning(UserWarning):
    """Base class of the warnings parllel issues."""


class ConfigError(ParllelError, ValueError):
    """A constructor argument or hyperparameter is invalid."""


class MissingDependencyError(ParllelError, ImportError):
    """An optional package a feature needs is not installed.

    The message names the package and the ``pip install`` line that adds it.
    """


class NonFiniteError(ParllelError, FloatingPointError):
    """A value that must be finite is NaN or infinite."""
