"""Hyperparameter schedules: plain callables of training progress in ``[0, 1]``.

Both backends' algorithms take them (``parllel.torch.algos.PPO``,
``parllel.jax.algos.PPO``); they import nothing.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Schedule", "constant_schedule", "linear_schedule"]

Schedule = Callable[[float], float]
"""Maps progress (0 at the start of training, 1 at the end) to a value."""


def constant_schedule(value: float) -> Schedule:
    """A schedule that always returns ``value``."""
    value = float(value)
    return lambda progress: value


def linear_schedule(start: float, end: float) -> Schedule:
    """Interpolate linearly from ``start`` (progress 0) to ``end`` (progress 1).

    Example:
        >>> linear_schedule(3e-4, 0.0)(0.5)
        0.00015
    """
    start, end = float(start), float(end)

    def schedule(progress: float) -> float:
        progress = min(max(float(progress), 0.0), 1.0)
        return start + (end - start) * progress

    return schedule
