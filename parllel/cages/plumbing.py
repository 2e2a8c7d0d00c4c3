"""Multiprocessing plumbing every process-based part of parllel shares.

- :func:`start_context`: the multiprocessing context of a start method
  (forkserver by default).
- :func:`wait_for`: spin-then-block waiting on a process-shared semaphore.
  A blocking wake-up (the waiter sleeps in the kernel until the semaphore is
  released) costs tens of microseconds, while a waiter that polls the
  semaphore (``sem_trywait``: an atomic operation, no system call) and
  yields the CPU between polls is woken within a few microseconds without
  starving the other processes (figures in docs/cages.md). So waiters poll
  with ``os.sched_yield()`` for a short budget, then block; a blocked waiter
  wakes up periodically to check that its peer is still alive. The
  semaphore carries both the wake-up and the memory ordering: everything
  the releasing process wrote before ``release()`` is visible after
  ``acquire()``.
- :func:`parent_check` and :class:`ParentGone`: how a child process (a cage
  worker, the background sampler's process, the sync probe) notices that
  the process that started it is gone, and ends quietly.
- :func:`usable_cores`: the CPU cores this process may run on.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from multiprocessing.synchronize import Semaphore
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

    #: A multiprocessing context that starts processes (typeshed's
    #: ``BaseContext``, what ``get_context(str)`` returns, has no ``Process``).
    StartContext = SpawnContext | ForkServerContext | ForkContext

_sched_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def wait_for(
    semaphore: Semaphore,
    spin_seconds: float,
    check_alive: Callable[[], None],
    poll_seconds: float = 0.1,
) -> None:
    """Acquire ``semaphore``: poll-and-yield up to ``spin_seconds``, then block.

    While blocked, ``check_alive()`` runs every ``poll_seconds``; it should
    raise (e.g. :class:`~parllel.errors.WorkerDiedError`) if the peer that
    would release the semaphore is gone, so a wait never hangs.
    """
    acquire = semaphore.acquire
    if acquire(False):
        return
    if spin_seconds > 0:
        deadline = time.perf_counter() + spin_seconds
        while True:
            _sched_yield()
            if acquire(False):
                return
            if time.perf_counter() > deadline:
                break
    while not acquire(True, poll_seconds):
        check_alive()


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
