"""CPU and resident memory of a process and its descendants, read from ``/proc``.

Used by the dashboard to show what a run costs: the training process plus
its env worker processes (and any background sampler). No extra package:
on Linux the numbers come from ``/proc/<pid>/stat``; elsewhere only the
process itself is measured, through :mod:`resource`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class ProcessSnapshot:
    """The CPU seconds and resident bytes of a process tree at one moment.

    Attributes:
        cpu_seconds: user plus system CPU time of every process in the tree
            (including the children they have reaped).
        rss_bytes: summed resident memory; on systems without ``/proc``, the
            peak resident memory of the process itself.
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


def _parse_stat(text: str) -> tuple[int, float, int] | None:
    """``(ppid, cpu_ticks, rss_pages)`` from the text of ``/proc/<pid>/stat``.

    The command name (second field) may hold spaces and parentheses: the
    fields are counted from its last ``)``.
    """
    end = text.rfind(")")
    if end < 0:
        return None
    fields = text[end + 1 :].split()
    if len(fields) < 22:
        return None
    # fields[0] is field 3 of stat(5): ppid is 4, utime..cstime 14..17, rss 24
    ppid = int(fields[1])
    ticks = sum(int(field) for field in fields[11:15])
    return ppid, float(ticks), int(fields[21])


def read_process_tree(
    pid: int, proc_root: str | os.PathLike[str] = "/proc"
) -> tuple[float, int, int] | None:
    """CPU ticks, resident pages and process count of ``pid`` and its descendants.

    Reads every ``<proc_root>/<n>/stat`` once. Processes that exit while
    the directory is read are skipped.

    Args:
        pid: the root of the tree.
        proc_root: where procfs is mounted (a test may pass a fake tree).

    Returns:
        ``(cpu_ticks, rss_pages, processes)``, or None if ``pid`` is not found.
    """
    root = Path(proc_root)
    stats: dict[int, tuple[int, float, int]] = {}
    children: dict[int, list[int]] = {}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            parsed = _parse_stat((root / entry.name / "stat").read_text())
        except (OSError, ValueError):
            continue  # exited meanwhile, or not readable
        if parsed is None:
            continue
        number = int(entry.name)
        stats[number] = parsed
        children.setdefault(parsed[0], []).append(number)
    if pid not in stats:
        return None
    ticks, pages, count = 0.0, 0, 0
    todo, seen = [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        _, current_ticks, current_pages = stats[current]
        ticks += current_ticks
        pages += current_pages
        count += 1
        todo.extend(children.get(current, ()))
    return ticks, pages, count


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
        proc_root: where procfs is mounted; without it (not Linux) only the
            process itself is measured, with :mod:`resource`.
    """

    def __init__(
        self,
        pid: int | None = None,
        *,
        clock: Callable[[], float] | None = None,
        proc_root: str | os.PathLike[str] = "/proc",
    ) -> None:
        self.pid = os.getpid() if pid is None else int(pid)
        self.clock = clock if clock is not None else time.monotonic
        self.proc_root = Path(proc_root)
        self.use_proc = (self.proc_root / str(self.pid) / "stat").exists()
        self.cores = os.cpu_count() or 1
        self._previous = self.snapshot()

    def snapshot(self) -> ProcessSnapshot | None:
        """The tree's CPU seconds and memory now (None if it cannot be read)."""
        now = self.clock()
        if self.use_proc:
            tree = read_process_tree(self.pid, self.proc_root)
            if tree is None:
                return None
            ticks, pages, count = tree
            return ProcessSnapshot(
                cpu_seconds=ticks / os.sysconf("SC_CLK_TCK"),
                rss_bytes=pages * os.sysconf("SC_PAGE_SIZE"),
                processes=count,
                at=now,
            )
        if self.pid != os.getpid():
            return None
        try:
            import resource
        except ImportError:  # pragma: no cover - Windows
            return None
        usage = resource.getrusage(resource.RUSAGE_SELF)
        # ru_maxrss: kilobytes on Linux, bytes on macOS
        scale = 1 if sys.platform == "darwin" else 1024
        return ProcessSnapshot(
            cpu_seconds=usage.ru_utime + usage.ru_stime,
            rss_bytes=int(usage.ru_maxrss) * scale,
            processes=1,
            at=now,
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
