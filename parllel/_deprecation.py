"""Renamed keywords, renamed and moved names: the old one still works, with a
warning, for one release."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

from parllel.errors import ConfigError


def renamed_keyword(
    where: str, old: str, new: str, old_value: Any, new_value: Any
) -> Any:
    """Return the value of keyword ``new``, accepting the deprecated ``old`` too.

    ``old_value`` / ``new_value`` are what the caller received (``None`` when
    not given). Passing ``old`` warns with a :class:`DeprecationWarning`;
    passing both is a :class:`~parllel.errors.ConfigError`; passing neither a
    ``TypeError``, as for any missing required argument.

    Example:
        >>> def f(gae_lambda=None, *, lambda_=None):
        ...     return renamed_keyword("f", "lambda_", "gae_lambda", lambda_, gae_lambda)
        >>> f(gae_lambda=0.9)
        0.9
    """
    if old_value is None:
        if new_value is None:
            raise TypeError(f"{where}() missing required argument: '{new}'")
        return new_value
    if new_value is not None:
        raise ConfigError(
            f"{where}() got both '{new}' and its deprecated name '{old}'; pass '{new}'"
        )
    warnings.warn(
        f"{where}(): keyword '{old}' is deprecated and will be removed in the next "
        f"release; use '{new}'",
        DeprecationWarning,
        stacklevel=3,
    )
    return old_value


def renamed_attribute(module: str, old: str, new: str, value: Any) -> Any:
    """Return ``value`` (the object now called ``new``) with a deprecation warning.

    For a module-level ``__getattr__`` that keeps ``module.old`` working.
    """
    warnings.warn(
        f"{module}.{old} is deprecated and will be removed in the next release; "
        f"use {module}.{new}",
        DeprecationWarning,
        stacklevel=3,
    )
    return value


def moved_attribute(old_module: str, new_module: str, name: str) -> Any:
    """Return ``new_module.name`` with a warning that ``old_module.name`` moved there.

    For a module-level ``__getattr__`` that keeps ``old_module.name`` working.
    """
    value = getattr(importlib.import_module(new_module), name)
    warnings.warn(
        f"{old_module}.{name} moved to {new_module}.{name}; the old path will be "
        "removed in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return value


def moved_module(old_module: str, new_module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for a module whose contents moved to ``new_module``.

    Every attribute of the old module is looked up in the new one, with a
    :class:`DeprecationWarning` naming the new path.

    Example:
        >>> __getattr__ = moved_module(__name__, "parllel.runtime.checkpoint")
    """

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or not hasattr(
            importlib.import_module(new_module), name
        ):
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        return moved_attribute(old_module, new_module, name)

    return __getattr__
