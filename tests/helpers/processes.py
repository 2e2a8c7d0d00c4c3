"""Processes a test starts: default Ctrl-C handling, and an end that leaves nothing.

A test that starts a script must end it, and everything the script started,
even when an assertion or a timeout fails the test first: otherwise a hung
training script keeps running and its shared-memory segments stay in
``/dev/shm`` after the test run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from parllel.arrays.shared_memory import list_segments, remove_dead_owner_segments


def default_sigint() -> None:
    """``preexec_fn`` that gives a child the default SIGINT disposition.

    A shell script's ``cmd &`` (and ``nohup``) starts its job with SIGINT
    ignored, and children inherit that: a test that sends SIGINT to a script
    it starts must not depend on how the test run itself was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def group_members(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] != "Z" and int(stat[2]) == pgid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def end_processes(
    process: subprocess.Popen, others: Iterable[int] = (), own_group: bool = False
) -> None:
    """Kill ``process`` (its whole group if it leads one) and ``others`` if alive,
    wait for them, and remove the shared memory any of them left.

    Safe to call on processes that already exited; call it in a ``finally``.
    """
    pids = {process.pid, *others}
    if own_group:
        pids.update(group_members(process.pid))
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:
        if list_segments(pid) and not _alive(pid):
            remove_dead_owner_segments(pid)
