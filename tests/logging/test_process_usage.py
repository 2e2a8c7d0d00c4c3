"""CPU and memory of a process tree, read from a fake and from the real /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parllel.logging.process_usage import ProcessMonitor, read_process_tree


def stat_line(pid: int, name: str, ppid: int, ticks: tuple[int, ...], rss: int) -> str:
    """A /proc/<pid>/stat line: utime, stime, cutime, cstime = ``ticks``."""
    fields = [str(pid), f"({name})", "S", str(ppid)] + ["0"] * 9
    fields += [str(t) for t in ticks] + ["20", "0", "1", "0", "0", "4096", str(rss)]
    fields += ["0"] * 20
    return " ".join(fields) + "\n"


def fake_proc(root: Path, processes: dict[int, tuple]) -> Path:
    for pid, (name, ppid, ticks, rss) in processes.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "stat").write_text(stat_line(pid, name, ppid, ticks, rss))
    (root / "self").mkdir(exist_ok=True)  # non-numeric entries are skipped
    (root / "meminfo").write_text("MemTotal: 1 kB\n")
    return root


TREE = {
    1: ("init", 0, (5, 5, 0, 0), 10),
    100: ("python train.py", 1, (100, 20, 3, 2), 1000),  # the run
    101: ("worker (0)", 100, (50, 10, 0, 0), 300),  # its env workers
    102: ("worker) (1", 100, (40, 10, 0, 0), 300),
    103: ("sampler", 101, (7, 3, 0, 0), 100),  # a grandchild
    200: ("other", 1, (999, 999, 0, 0), 5000),  # not in the tree
}


def test_the_tree_of_a_process_sums_its_descendants_only(tmp_path):
    root = fake_proc(tmp_path, TREE)
    ticks, pages, count = read_process_tree(100, root)
    assert count == 4
    assert ticks == (100 + 20 + 3 + 2) + 60 + 50 + 10
    assert pages == 1000 + 300 + 300 + 100
    assert read_process_tree(103, root) == (10.0, 100, 1)
    assert read_process_tree(999, root) is None


def test_unreadable_or_malformed_entries_are_skipped(tmp_path):
    root = fake_proc(tmp_path, TREE)
    (root / "101" / "stat").write_text("garbage without a parenthesis")
    (root / "300").mkdir()  # a process that exited: no stat file
    ticks, pages, count = read_process_tree(100, root)
    # 101 cannot be read, so its child 103 is not found either
    assert count == 2 and pages == 1300


def test_monitor_reports_cpu_percent_since_the_previous_sample(tmp_path):
    root = fake_proc(tmp_path, TREE)
    clock = [10.0]
    monitor = ProcessMonitor(100, clock=lambda: clock[0], proc_root=root)
    tick = os.sysconf("SC_CLK_TCK")
    name, ppid, (user, system, cuser, csystem), rss = TREE[100]
    spent = 2 * tick  # two CPU seconds over four wall seconds: 50 %
    busier = {**TREE, 100: (name, ppid, (user + spent, system, cuser, csystem), rss)}
    fake_proc(root, busier)
    clock[0] = 14.0
    usage = monitor.sample()
    assert usage.cpu_percent == pytest.approx(50.0)
    assert usage.processes == 4
    assert usage.rss_bytes == 1700 * os.sysconf("SC_PAGE_SIZE")
    clock[0] = 15.0
    assert monitor.sample().cpu_percent == 0.0  # nothing spent since


def test_monitor_of_a_vanished_process_reports_nothing(tmp_path):
    root = fake_proc(tmp_path, TREE)
    monitor = ProcessMonitor(103, proc_root=root)
    (root / "103" / "stat").unlink()
    assert monitor.sample() is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs")
def test_the_real_process_and_a_child_are_counted():
    monitor = ProcessMonitor()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        usage = monitor.sample()
        assert usage.processes >= 2 and usage.rss_bytes > 10 * 2**20
        assert usage.cpu_percent >= 0 and usage.cores == os.cpu_count()
    finally:
        child.kill()
        child.wait()
