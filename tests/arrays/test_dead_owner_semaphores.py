"""Named semaphores of a process killed together with its resource tracker
(as Ray kills an actor) are unlinked by remove_dead_owner_segments."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from parllel.arrays.shared_memory import list_segments, remove_dead_owner_segments
from tests.helpers.processes import end_processes

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/dev/shm"), reason="named semaphores live in /dev/shm"
)

CHILD = """
import multiprocessing as mp, os, signal, sys
from multiprocessing import resource_tracker
from parllel.arrays.shared_memory import record_semaphores
ctx = mp.get_context("forkserver")
semaphores = [ctx.Semaphore(0), ctx.Semaphore(0)]
listing = record_semaphores(semaphores)
print(os.getpid(), *(s._semlock.name for s in semaphores), flush=True)
sys.stdin.readline()  # the parent has read the names
os.kill(resource_tracker._resource_tracker._pid, signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""


def semaphore_file(name: str) -> str:
    return os.path.join("/dev/shm", "sem." + name.lstrip("/"))


@pytest.mark.timeout(60)
def test_a_killed_owners_listed_semaphores_are_unlinked():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pid_text, *names = child.stdout.readline().split()
        pid = int(pid_text)
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(30)
    finally:
        if child.poll() is None:
            end_processes(child)
    assert len(names) == 2
    # nobody cleaned up: the tracker died with its process
    assert all(os.path.exists(semaphore_file(name)) for name in names)
    assert len(list_segments(pid)) == 1
    removed = remove_dead_owner_segments(pid)
    assert len(removed) == 1 and removed[0].endswith("_semaphores")
    assert not any(os.path.exists(semaphore_file(name)) for name in names)
    assert list_segments(pid) == []


def test_a_closed_listing_leaves_nothing():
    import multiprocessing as mp

    from parllel.arrays.shared_memory import record_semaphores

    semaphore = mp.get_context("forkserver").Semaphore(0)
    listing = record_semaphores([semaphore])
    assert listing is not None and not listing.closed
    listing.close()
    assert listing.name not in list_segments(os.getpid())
