"""Spin-then-block waiting on a process-shared semaphore.

Measured on this 2-core machine (docs/cages.md): any blocking wake-up costs
50-75 us, while a waiter that polls the semaphore (``sem_trywait``: an atomic
operation, no system call) and yields the CPU between polls is woken within
a few microseconds without starving the other processes. So waiters poll with
``os.sched_yield()`` for a short budget, then block; a blocked waiter wakes up
periodically to check that its peer is still alive.

The semaphore carries both the wake-up and the memory ordering: everything the
releasing process wrote before ``release()`` is visible after ``acquire()``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

_sched_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def wait_for(
    semaphore: Any,
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
