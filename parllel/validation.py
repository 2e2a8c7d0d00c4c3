"""Argument checks every layer shares: positive numbers, fractions, counts.

Each check returns the checked value (converted where it says so) or raises
:class:`~parllel.errors.ConfigError` naming the argument and the value it got.
NaN fails every check.

Example:
    >>> self.epsilon = check_positive("epsilon", epsilon)
    >>> check_at_least("batch_T", batch_T)
"""

from __future__ import annotations

import math
from typing import Any

from parllel.errors import ConfigError

__all__ = [
    "check_at_least",
    "check_count",
    "check_fraction",
    "check_positive",
    "check_positive_or_schedule",
    "check_ppo_options",
    "check_target_update",
]


def check_positive(name: str, x: Any, *, allow_inf: bool = False) -> float:
    """``x`` as a float if it is > 0 (and finite unless ``allow_inf``)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a positive number, got {x!r}") from None
    if not x > 0.0 or (math.isinf(x) and not allow_inf):
        raise ConfigError(f"{name} must be a positive number, got {x}")
    return x


def check_fraction(
    name: str, x: Any, *, allow_zero: bool = True, allow_one: bool = True
) -> float:
    """``x`` as a float if it lies in ``[0, 1]``; ``allow_zero`` / ``allow_one``
    false open that end of the interval."""
    interval = f"{'[' if allow_zero else '('}0, 1{']' if allow_one else ')'}"
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number in {interval}, got {x!r}") from None
    low_ok = x >= 0.0 if allow_zero else x > 0.0
    high_ok = x <= 1.0 if allow_one else x < 1.0
    if not (low_ok and high_ok):
        raise ConfigError(f"{name} must be in {interval}, got {x}")
    return x


def check_at_least(name: str, x: Any, minimum: int = 1) -> Any:
    """``x`` unchanged if ``x >= minimum`` (any number type)."""
    if not x >= minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {x}")
    return x


def check_count(name: str, x: Any, minimum: int = 1) -> int:
    """``x`` if it is an ``int`` (not a bool) ``>= minimum``."""
    if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}; got {x!r}")
    return x


def check_positive_or_schedule(name: str, value: Any, allow_none: bool = False) -> None:
    """Check that ``value`` is a positive number or a schedule (a callable of
    progress) positive at progress 0 and non-negative at 1; ``None`` only
    where ``allow_none``."""
    if value is None:
        if not allow_none:
            raise ConfigError(f"{name} must be given")
        return
    if callable(value):
        try:
            start, end = float(value(0.0)), float(value(1.0))
        except Exception as exc:
            raise ConfigError(
                f"{name} schedule failed when called with progress 0 or 1: {exc!r}"
            ) from exc
        if not (start > 0 and end >= 0 and math.isfinite(start) and math.isfinite(end)):
            raise ConfigError(
                f"{name} schedule must give a positive value at progress 0 and a "
                f"non-negative one at progress 1; got {start} and {end}"
            )
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number or a schedule; got {value!r}")
    check_positive(name, value)


def check_target_update(interval: int | None, tau: float | None) -> int | None:
    """A target network's update rule: a hard copy every ``interval`` updates
    (default 1000) or polyak averaging with ``tau`` in ``(0, 1]``, not both.

    Returns:
        The interval (None with ``tau``).
    """
    if tau is not None:
        if interval is not None:
            raise ConfigError("give target_update_interval or tau, not both")
        check_fraction("tau", tau, allow_zero=False)
        return None
    interval = 1000 if interval is None else interval
    check_at_least("target_update_interval (or give tau)", interval)
    return interval


def check_ppo_options(
    *,
    learning_rate: Any,
    clip_range: Any,
    value_clip_range: Any,
    value_loss_coef: float,
    entropy_coef: float,
    max_grad_norm: float | None,
    target_kl: float | None,
    epochs: int,
    minibatches: int,
    total_updates: int | None,
) -> None:
    """The hyperparameters both backends' PPO take: positive rates and clip
    ranges (numbers or schedules), non-negative loss weights, positive limits,
    counts of at least 1."""
    check_positive_or_schedule("learning_rate", learning_rate, allow_none=True)
    check_positive_or_schedule("clip_range", clip_range, allow_none=False)
    check_positive_or_schedule("value_clip_range", value_clip_range, True)
    for name, value in (
        ("value_loss_coef", value_loss_coef),
        ("entropy_coef", entropy_coef),
    ):
        if not (value >= 0 and math.isfinite(value)):
            raise ConfigError(f"{name} must be non-negative; got {value}")
    for name, limit in (("max_grad_norm", max_grad_norm), ("target_kl", target_kl)):
        if limit is not None:
            check_positive(name, limit, allow_inf=True)
    check_count("epochs", epochs)
    check_count("minibatches", minibatches)
    if total_updates is not None:
        check_at_least("total_updates", total_updates)
