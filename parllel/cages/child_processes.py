"""Child processes: how every process-based part of parllel starts and ends them.

- :func:`start_context`: the multiprocessing context of a start method
  (forkserver by default).
- :func:`parent_check` and :class:`ParentGone`: how a child process (a cage
  worker, the background sampler's process, the sync probe) notices that
  the process that started it is gone, and ends quietly.
- :func:`usable_cores`: the CPU cores this process may run on.

Waiting on a process-shared semaphore
(:func:`~parllel.cages.process.channel.wait_for`) lives with the channel it
serves.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

    #: A multiprocessing context that starts processes (typeshed's
    #: ``BaseContext``, what ``get_context(str)`` returns, has no ``Process``).
    StartContext = SpawnContext | ForkServerContext | ForkContext


def default_context() -> StartContext:
    """forkserver where available (fast starts, safe with threads), else spawn."""
    methods = mp.get_all_start_methods()
    return start_context("forkserver" if "forkserver" in methods else "spawn")


def start_context(start_method: str | None) -> StartContext:
    """The multiprocessing context of ``start_method`` (None: :func:`default_context`)."""
    if start_method is None:
        return default_context()
    return cast("StartContext", mp.get_context(start_method))


class ParentGone(Exception):
    """Internal: the process that started this one exited; this one ends quietly.

    Raised by the check :func:`parent_check` returns, inside a child's wait
    loop; the child's entry function catches it, cleans up and returns.
    """


def parent_check() -> Callable[[], None]:
    """A check that raises :class:`ParentGone` once this process's parent exited.

    Call it in the child process (it captures
    ``multiprocessing.parent_process()``); in a process that multiprocessing
    did not start, the check never raises.
    """
    parent = mp.parent_process()

    def check_parent() -> None:
        if parent is not None and not parent.is_alive():
            raise ParentGone(
                f"the parent process (pid {parent.pid}) of process {os.getpid()} "
                "exited; this process stops"
            )

    return check_parent


def usable_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_worker_count(cores: int, main_steps: bool = False) -> int:
    """Worker processes to step envs on ``cores`` usable cores.

    One per core but the main process's when it steps a share of the envs
    itself; when it steps none, also one fewer from 4 cores on, so the
    sampler loop and inference (a CUDA handler's too) keep a core that no
    worker competes for (a descheduled worker holds up the whole vector
    step); on 2 or 3 cores every core steps.
    """
    if main_steps or cores >= 4:
        return max(1, cores - 1)
    return max(1, cores)
