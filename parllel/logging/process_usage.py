"""CPU and resident memory of a process and its descendants, through psutil.

Used by the dashboard to show what a run costs: the training process plus
its env worker processes (and any background sampler). psutil comes with the
``logging`` extra.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

from parllel.errors import MissingDependencyError
from parllel.errors.base import install_hint


@dataclasses.dataclass(frozen=True)
class ProcessSnapshot:
    """The CPU seconds and resident bytes of a process tree at one moment.

    Attributes:
        cpu_seconds: user plus system CPU time of every process in the tree
            (including the children they have reaped).
        rss_bytes: summed resident memory.
        processes: how many processes were counted.
        at: the clock reading the snapshot was taken at, in seconds.
    """

    cpu_seconds: float
    rss_bytes: int
    processes: int
    at: float


@dataclasses.dataclass(frozen=True)
class ProcessUsage:
    """What :meth:`ProcessMonitor.sample` reports.

    Attributes:
        cpu_percent: CPU use since the previous sample, 100 per busy core.
        rss_bytes: resident memory now (see :class:`ProcessSnapshot`).
        processes: processes counted.
        cores: logical CPUs of the machine.
    """

    cpu_percent: float
    rss_bytes: int
    processes: int
    cores: int


def _psutil() -> Any:
    """The psutil module (the ``logging`` extra), or a clear error without it."""
    try:
        import psutil
    except ImportError as error:
        raise MissingDependencyError(
            "measuring a run's CPU and memory (the dashboard's system line) needs "
            f"the 'psutil' package: pip install psutil, or {install_hint('logging')} "
            "(or build the Dashboard with system=False)"
        ) from error
    return psutil


def read_process_tree(pid: int) -> tuple[float, int, int] | None:
    """CPU seconds, resident bytes and process count of ``pid`` and its descendants.

    CPU seconds are user plus system time, with the children each process has
    reaped. Processes that exit while the tree is read are skipped.

    Returns:
        ``(cpu_seconds, rss_bytes, processes)``, or None if ``pid`` is gone.
    """
    psutil = _psutil()
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
    seconds, rss, count = 0.0, 0, 0
    for process in processes:
        try:
            with process.oneshot():
                times = process.cpu_times()
                memory = process.memory_info()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            if process is root:
                return None
            continue  # exited while the tree was read
        seconds += times.user + times.system + times.children_user
        seconds += times.children_system
        rss += memory.rss
        count += 1
    return seconds, rss, count


class ProcessMonitor:
    """Samples the CPU and memory use of a process tree (this process by default).

    Each :meth:`sample` returns the CPU use since the previous one (the
    first: since the monitor was built) and the resident memory now.

    Example:
        >>> monitor = ProcessMonitor()
        >>> usage = monitor.sample()  # e.g. ProcessUsage(cpu_percent=97.5, ...)

    Args:
        pid: the root process; ``os.getpid()`` if None.
        clock: wall-clock seconds (monotonic).
    """

    def __init__(
        self, pid: int | None = None, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.clock = clock if clock is not None else time.monotonic
        self.cores = os.cpu_count() or 1
        _psutil()  # refuse at construction, not at the first sample
        self._previous = self.snapshot()

    def snapshot(self) -> ProcessSnapshot | None:
        """The tree's CPU seconds and memory now (None if the process is gone)."""
        now = self.clock()
        tree = read_process_tree(self.pid)
        if tree is None:
            return None
        seconds, rss, count = tree
        return ProcessSnapshot(
            cpu_seconds=seconds, rss_bytes=rss, processes=count, at=now
        )

    def sample(self) -> ProcessUsage | None:
        """CPU use since the last sample and memory now; None if unreadable."""
        current = self.snapshot()
        if current is None:
            return None
        previous, self._previous = self._previous, current
        if previous is None or current.at <= previous.at:
            percent = float("nan")
        else:
            spent = max(current.cpu_seconds - previous.cpu_seconds, 0.0)
            percent = 100.0 * spent / (current.at - previous.at)
        return ProcessUsage(
            cpu_percent=percent,
            rss_bytes=current.rss_bytes,
            processes=current.processes,
            cores=self.cores,
        )
