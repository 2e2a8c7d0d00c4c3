"""CPU and memory of a process tree: this process, its children, their children."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import pytest

from parllel.logging.process_usage import ProcessMonitor, read_process_tree
from tests.helpers.processes import end_processes

pytest.importorskip("psutil")

# a child that starts a sleeping grandchild, then burns CPU until killed
TREE_SCRIPT = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(grandchild.pid, flush=True)
while True:
    pass
"""


@pytest.fixture
def busy_tree():
    child = subprocess.Popen(
        [sys.executable, "-c", TREE_SCRIPT], stdout=subprocess.PIPE, text=True
    )
    grandchild = int(child.stdout.readline())
    try:
        yield child.pid, grandchild
    finally:
        end_processes(child, [grandchild])
        child.stdout.close()


def test_the_tree_counts_descendants_and_their_cpu(busy_tree):
    child, grandchild = busy_tree
    seconds, rss, count = read_process_tree(child)
    assert count == 2  # the child and its grandchild
    assert rss > 2 * 5 * 2**20  # two Python interpreters
    assert read_process_tree(grandchild)[2] == 1
    time.sleep(0.5)
    assert read_process_tree(child)[0] > seconds  # the child burns CPU


def test_this_process_tree_includes_the_child(busy_tree):
    child, _ = busy_tree
    mine = read_process_tree(os.getpid())
    assert mine[2] >= 3 and mine[1] > read_process_tree(child)[1]


def test_monitor_reports_cpu_percent_since_the_previous_sample(busy_tree):
    child, _ = busy_tree
    clock = [10.0]
    monitor = ProcessMonitor(child, clock=lambda: clock[0])
    start = time.monotonic()
    time.sleep(1.0)
    clock[0] += time.monotonic() - start
    usage = monitor.sample()
    # one busy loop on a loaded 2-core machine: well above idle, at most all cores
    assert 10.0 < usage.cpu_percent <= 100.0 * os.cpu_count() + 5
    assert usage.processes == 2 and usage.cores == os.cpu_count()
    assert math.isnan(monitor.sample().cpu_percent)  # no clock time since: undefined


def test_monitor_of_a_vanished_process_reports_nothing():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert read_process_tree(child.pid) is None
    monitor = ProcessMonitor(child.pid)
    assert monitor.sample() is None
