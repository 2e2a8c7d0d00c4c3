"""The cost model: serial stepping or a process layout, from measured costs.

On a small machine a process cage only pays when the env steps it moves off
the main process cost clearly more than its synchronizations, and three
stepping processes on two cores are worse than two. So
:func:`suggest_layout` weighs the time of an env step
(:func:`measure_step_seconds`, timed in this process) against what a synchronized step with a worker costs beyond the env
step (:func:`~parllel.cages.process.step_overhead.measure_step_overhead_seconds`,
timed with a real process cage of a do-nothing env) and returns a
:class:`~parllel.cages.ProcessLayout`, or None when serial stepping is
expected to win.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from parllel.cages.child_processes import usable_cores
from parllel.cages.layout.process_layout import ProcessLayout
from parllel.cages.spaces import legal_sample
from parllel.errors import ConfigError, EnvError

__all__ = ["ASSUMED_SYNC_SECONDS", "measure_step_seconds", "suggest_layout"]

# The synchronization cost suggest_layout assumes when it is given no
# measurement (docs/cages.md says where the figure comes from); build_cage
# measures the machine it runs on instead.
ASSUMED_SYNC_SECONDS = 40e-6


def suggest_layout(
    n_envs: int,
    step_seconds: float,
    cores: int | None = None,
    sync_seconds: float | None = None,
) -> ProcessLayout | None:
    """The ProcessCage layout for ``n_envs`` envs, or None for serial stepping.

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
            (:func:`~parllel.cages.process.step_overhead.measure_step_seconds`).
        cores: usable cores (default: this process's).
        sync_seconds: seconds per synchronization round trip with a worker
            (:func:`~parllel.cages.process.step_overhead.measure_step_overhead_seconds`;
            default: ``ASSUMED_SYNC_SECONDS``, a figure of a 2-core VM).

    Example:
        >>> suggest_layout(64, step_seconds=8e-6, cores=2)
        ProcessLayout(main_process_envs=32, n_workers=1, envs_per_worker=None, rebalance=False)
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
    return ProcessLayout(main_process_envs=n_envs // processes, n_workers=processes - 1)


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
        observation, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        what = "step"
        elapsed = 0.0
        for _ in range(steps):
            action = legal_sample(env.action_space, observation)
            start = time.perf_counter()
            observation, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                observation, _ = env.reset()
            elapsed += time.perf_counter() - start
        return elapsed / steps
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
