"""Hyperparameter schedules: plain callables of training progress in ``[0, 1]``,
and :func:`epsilon_schedule`, DQN's exploration rate by env step.

Both backends' algorithms take them (``parllel.torch.algos.PPO``,
``parllel.jax.algos.PPO``; ``AttributeSchedule`` sets a DQN agent's epsilon);
they import no backend.
"""

from __future__ import annotations

from collections.abc import Callable

from parllel.validation import check_at_least, check_fraction

__all__ = ["Schedule", "constant_schedule", "epsilon_schedule", "linear_schedule"]

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


def epsilon_schedule(
    start: float = 1.0, end: float = 0.05, decay_steps: int = 10_000
) -> Callable[[int], float]:
    """Epsilon for epsilon-greedy exploration as a function of the env step.

    Decays linearly from ``start`` to ``end`` over ``decay_steps`` steps, then
    stays at ``end``.

    Example:
        >>> schedule = epsilon_schedule(1.0, 0.1, decay_steps=100)
        >>> schedule(0), schedule(50), schedule(1000)
        (1.0, 0.55, 0.1)

    Raises:
        ConfigError: epsilons outside ``[0, 1]`` or ``decay_steps < 1``.
    """
    check_fraction("start", start)
    check_fraction("end", end)
    check_at_least("decay_steps", decay_steps)

    def schedule(step: int) -> float:
        if step >= decay_steps:
            return end
        return start + (end - start) * max(step, 0) / decay_steps

    return schedule
