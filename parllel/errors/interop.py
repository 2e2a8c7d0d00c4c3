"""Errors of the interop adapters (:mod:`parllel.interop`).

The errors that are also gymnasium's vector-env exception types are in
:mod:`parllel.errors.vector_env` (which imports gymnasium)."""

from __future__ import annotations

from parllel.errors.base import ConfigError

__all__ = ["UnsupportedVectorEnvError"]


class UnsupportedVectorEnvError(ConfigError):
    """A gymnasium vector env cannot serve as asked (e.g. its autoreset mode).

    Raised by ``parllel.interop.VectorEnvCage``; the message names what the
    vector env lacks and how to build one that has it.
    """
