"""Choose serial or process stepping, and the worker layout, by measurement.

On a small machine a process cage only pays when an env step costs clearly
more than a synchronization (tens of microseconds here; docs/cages.md), and
three stepping processes on two cores are worse than two. So:
:func:`suggest_layout` times a few steps of one env in this process and
returns keyword arguments for :class:`~parllel.cages.ProcessCage`, or None when
serial stepping is expected to win.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from parllel.errors import ConfigError

# Cost of one synchronized vector step of a process cage on a 2-core machine,
# main-side dispatch included (measured with do-nothing envs; docs/cages.md).
SYNC_SECONDS = 40e-6


def usable_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def measure_step_seconds(
    env_factory: Callable[..., Any],
    env_kwargs: dict[str, Any] | None = None,
    steps: int = 200,
    seed: int = 0,
) -> float:
    """Median-free mean seconds per ``env.step`` (random actions, resets included)."""
    env = env_factory(**(env_kwargs or {}))
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        actions = [env.action_space.sample() for _ in range(steps)]
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return (time.perf_counter() - start) / steps
    finally:
        env.close()


def suggest_layout(
    n_envs: int,
    step_seconds: float,
    cores: int | None = None,
    sync_seconds: float = SYNC_SECONDS,
) -> dict[str, int] | None:
    """ProcessCage keyword arguments for ``n_envs`` envs, or None for serial stepping.

    The main process steps ``1 / cores`` of the envs itself and ``cores - 1``
    workers step the rest (never more stepping processes than cores). Serial
    stepping is chosen when there is one core, or when the time the main
    process would save per vector step is below three synchronizations.

    Example:
        >>> suggest_layout(64, step_seconds=8e-6, cores=2)
        {'main_process_envs': 32, 'n_workers': 1}
    """
    if n_envs < 1:
        raise ConfigError(f"n_envs must be >= 1, got {n_envs}")
    cores = usable_cores() if cores is None else cores
    if cores < 2 or n_envs < 2:
        return None
    processes = min(cores, n_envs)
    saved = step_seconds * n_envs * (1 - 1 / processes)
    if saved < 3 * sync_seconds:
        return None
    return {"main_process_envs": n_envs // processes, "n_workers": processes - 1}
