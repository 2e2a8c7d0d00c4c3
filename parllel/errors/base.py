"""The bases, and the errors every layer raises."""

from __future__ import annotations

from parllel import DISTRIBUTION

__all__ = [
    "ConfigError",
    "MissingDependencyError",
    "NonFiniteError",
    "ParllelError",
    "ParllelWarning",
    "install_hint",
]


class ParllelError(Exception):
    """Base class of every error raised by parllel."""


class ParllelWarning(UserWarning):
    """The warning parllel issues (filter by its message to silence one)."""


class ConfigError(ParllelError, ValueError):
    """A constructor argument or hyperparameter is invalid."""


class MissingDependencyError(ParllelError, ImportError):
    """An optional package a feature needs is not installed.

    The message names the package and the ``pip install`` line that adds it
    (:func:`install_hint` for parllel's extras).
    """


class NonFiniteError(ParllelError, FloatingPointError):
    """A value that must be finite is NaN or infinite: an env's observation or
    reward (the sampler's check), a tensor of a checkpoint being saved, or an
    algorithm's loss or gradient norm (raised before the optimizer step, so the
    weights are those of the last finite update).

    Attributes:
        terms: names of the non-finite loss terms / gradient norms (empty for
            the other checks).
    """

    def __init__(self, message: str, terms: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.terms = terms


def install_hint(*extras: str) -> str:
    """The command that installs parllel's ``extras``, for error messages.

    parllel is installed from its checkout (editable), so the hint is the
    ``pip install -e`` line run there; the distribution name is given too.

    Example:
        >>> install_hint("torch", "logging")
        'pip install -e ".[torch,logging]" in the parllel checkout (parllel-rl[torch,logging])'
    """
    names = ",".join(extras)
    return (
        f'pip install -e ".[{names}]" in the parllel checkout ({DISTRIBUTION}[{names}])'
    )
