"""Spin-then-block waiting on a process-shared semaphore, and its round-trip cost.

A blocking wake-up (the waiter sleeps in the kernel until the semaphore is
released) costs tens of microseconds, while a waiter that polls the
semaphore (``sem_trywait``: an atomic operation, no system call) and yields
the CPU between polls is woken within a few microseconds without starving
the other processes (figures in docs/cages.md). So waiters poll with
``os.sched_yield()`` for a short budget, then block; a blocked waiter wakes
up periodically to check that its peer is still alive.

The semaphore carries both the wake-up and the memory ordering: everything the
releasing process wrote before ``release()`` is visible after ``acquire()``.

:func:`measure_sync_seconds` times the round trip on the machine at hand.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from multiprocessing.synchronize import Semaphore
from typing import TYPE_CHECKING, cast

from parllel.cages.main_guard import check_main_guard

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


class _PeerGone(Exception):
    pass


def _echo(ping: Semaphore, pong: Semaphore, rounds: int, spin_seconds: float) -> None:
    """The helper process of :func:`measure_sync_seconds`: answer every ping."""
    parent = mp.parent_process()

    def check_parent() -> None:
        if parent is not None and not parent.is_alive():
            raise _PeerGone

    try:
        for _ in range(rounds):
            wait_for(ping, spin_seconds, check_parent)
            pong.release()
    except _PeerGone:
        pass


def measure_sync_seconds(
    rounds: int = 100,
    start_method: str | None = None,
    spin_seconds: float = 0.002,
    timeout: float = 30.0,
) -> float:
    """Median seconds of one synchronization round trip with another process.

    Starts one helper process (the cost of starting a worker), then the main
    process releases a semaphore and waits (:func:`wait_for`) for the helper
    to release another one, ``rounds`` times, as a ProcessCage step does
    with envs that cost nothing. Both sides poll for up to ``spin_seconds``
    before blocking, as idle workers do while every process has a core.

    Raises:
        ConfigError: called from unguarded top-level code of the main script
            with a start method that re-runs it (see ProcessCage).
        TimeoutError: the helper did not answer within ``timeout`` seconds.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    ctx = start_context(start_method)
    check_main_guard(ctx.get_start_method())  # the helper would re-run the script
    ping, pong = ctx.Semaphore(0), ctx.Semaphore(0)
    helper = ctx.Process(
        target=_echo,
        args=(ping, pong, rounds + 1, spin_seconds),
        name="parllel-sync-probe",
        daemon=True,
    )
    deadline = time.monotonic() + timeout

    def check_helper() -> None:
        if helper.exitcode is not None or time.monotonic() > deadline:
            raise TimeoutError("the sync-probe process did not answer")

    helper.start()
    try:
        ping.release()  # first round: waits for the helper to start, not timed
        wait_for(pong, 0.0, check_helper)
        seconds = []
        for _ in range(rounds):
            start = time.perf_counter()
            ping.release()
            wait_for(pong, spin_seconds, check_helper)
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds)
    finally:
        helper.join(1.0)
        if helper.exitcode is None:
            helper.kill()
            helper.join(1.0)
        helper.close()
