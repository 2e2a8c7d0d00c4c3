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
import traceback
from collections.abc import Callable
from typing import Any

from parllel.errors import ConfigError, EnvError

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
    """Mean seconds per ``env.step`` of one probe env (random actions, resets included).

    The probe env is built, stepped and closed in this process.

    Raises:
        EnvError: the env raised while being built, reset or stepped
            (with its traceback in ``worker_traceback``).
    """
    try:
        env = env_factory(**(env_kwargs or {}))
    except Exception as exc:
        raise _probe_error("its construction", exc) from exc
    what = "reset"
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        actions = [env.action_space.sample() for _ in range(steps)]
        what = "step"
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return (time.perf_counter() - start) / steps
    except Exception as exc:
        raise _probe_error(what, exc) from exc
    finally:
        try:
            env.close()
        except Exception:  # a broken env may fail to close; its error came first
            pass


def _probe_error(what: str, exc: Exception) -> EnvError:
    return EnvError(
        f"the probe env that times env steps in this process (to choose serial "
        f"or process stepping) raised {type(exc).__name__} in {what}: {exc}",
        worker_traceback=traceback.format_exc(),
    )


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
