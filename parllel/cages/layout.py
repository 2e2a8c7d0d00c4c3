"""Choose serial or process stepping, and the worker layout, by measurement.

On a small machine a process cage only pays when the env steps it moves off
the main process cost clearly more than its synchronizations, and three
stepping processes on two cores are worse than two. So
:func:`suggest_layout` weighs the time of an env step
(:func:`~parllel.cages.costs.measure_step_seconds`, timed in this process)
against what a synchronized step with a worker costs beyond the env step
(:func:`~parllel.cages.costs.measure_step_overhead_seconds`, timed with a
real process cage of a do-nothing env) and returns keyword arguments for
:class:`~parllel.cages.ProcessCage`, or None when serial stepping is expected
to win.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parllel.cages.costs import measure_step_overhead_seconds, measure_step_seconds
from parllel.cages.plumbing import usable_cores
from parllel.errors import ConfigError

__all__ = ["ASSUMED_SYNC_SECONDS", "suggest_layout", "suggest_layout_for"]

# The synchronization cost suggest_layout assumes when it is given no
# measurement (docs/cages.md says where the figure comes from); build_cages
# measures the machine it runs on instead.
ASSUMED_SYNC_SECONDS = 40e-6


def suggest_layout(
    n_envs: int,
    step_seconds: float,
    cores: int | None = None,
    sync_seconds: float | None = None,
) -> dict[str, int] | None:
    """ProcessCage keyword arguments for ``n_envs`` envs, or None for serial stepping.

    The main process steps ``1 / processes`` of the envs itself and
    ``processes - 1`` workers step the rest. ``processes`` is the number of
    cores, but never more than there are envs, nor more than make each
    process's share take one synchronization at least (``step_seconds *
    n_envs / sync_seconds``: on 16 cores, 64 CartPole envs get about 12
    processes, 64 Atari envs 16). Serial stepping is chosen when there is
    one core, or when the time the main process would save per vector step
    is below three synchronizations.

    Args:
        n_envs: envs to step.
        step_seconds: seconds per env step
            (:func:`~parllel.cages.costs.measure_step_seconds`).
        cores: usable cores (default: this process's).
        sync_seconds: seconds per synchronization round trip with a worker
            (:func:`~parllel.cages.costs.measure_step_overhead_seconds`;
            default: ``ASSUMED_SYNC_SECONDS``, a figure of a 2-core VM).

    Example:
        >>> suggest_layout(64, step_seconds=8e-6, cores=2)
        {'main_process_envs': 32, 'n_workers': 1}
    """
    if n_envs < 1:
        raise ConfigError(f"n_envs must be >= 1, got {n_envs}")
    cores = usable_cores() if cores is None else cores
    if cores < 2 or n_envs < 2:
        return None
    if sync_seconds is None:
        sync_seconds = ASSUMED_SYNC_SECONDS
    processes = min(cores, n_envs)
    saved = step_seconds * n_envs * (1 - 1 / processes)
    if saved < 3 * sync_seconds:
        return None
    if sync_seconds > 0:
        # a process whose share steps in less than one synchronization adds
        # more waiting than it takes off the others (many cores, cheap envs)
        worth = int(step_seconds * n_envs / sync_seconds)
        processes = max(2, min(processes, worth))
    return {"main_process_envs": n_envs // processes, "n_workers": processes - 1}


def suggest_layout_for(
    env_factory: Callable[..., Any],
    n_envs: int,
    env_kwargs: dict[str, Any] | None = None,
    start_method: str | None = None,
) -> dict[str, int] | None:
    """:func:`suggest_layout` with both costs measured on this machine, now.

    Times env steps of one probe env
    (:func:`~parllel.cages.costs.measure_step_seconds`) and, only when
    processes could win (two cores and two envs at least), what a
    synchronized step with a worker started with ``start_method`` costs
    beyond stepping the env here
    (:func:`~parllel.cages.costs.measure_step_overhead_seconds`).

    Raises:
        EnvError: the probe env raised (see
            :func:`~parllel.cages.costs.measure_step_seconds`).
    """
    step_seconds = measure_step_seconds(env_factory, env_kwargs)
    cores = usable_cores()
    sync_seconds = None
    if cores >= 2 and n_envs >= 2:
        sync_seconds = measure_step_overhead_seconds(start_method=start_method)
    return suggest_layout(n_envs, step_seconds, cores, sync_seconds)
