"""Ctrl-C on a learner script with a BackgroundSampler over process cages.

The script runs in its own session, as in a terminal; a Ctrl-C there sends
SIGINT to the whole process group (learner, background process, cage
workers), ``kill -INT`` to the learner alone. Either way the script exits,
and no process of its tree nor shared-memory segment of it is left.
pytest-timeout fails a hang; nothing waits on a clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments
from tests.helpers.processes import default_sigint, end_processes, group_members

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "helpers" / "background_ctrl_c_script.py"


def run_until_training(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, list[int]]:
    pids_file = tmp_path / "pids.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(pids_file), mode],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a terminal job
        preexec_fn=default_sigint,
    )
    line = process.stdout.readline()
    if line != "training\n":
        end_processes(process, own_group=True)
        raise AssertionError(f"got {line!r}; stderr:\n{process.communicate()[1]}")
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3  # the background process and its two workers
    assert set(pids) <= set(group_members(process.pid))
    return process, pids


def assert_nothing_left(process: subprocess.Popen, pids: list[int]) -> None:
    while group_members(
        process.pid
    ):  # e.g. the forkserver, exiting once its pipe closes
        time.sleep(0.01)
    for pid in [process.pid, *pids]:
        assert not list_segments(pid), f"segments of {pid} left"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("target", ["group", "learner"])
def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing(tmp_path, target):
    process, pids = run_until_training(tmp_path, "raise")
    try:
        if target == "group":
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            end_processes(process, pids, own_group=True)
    assert process.returncode in (-signal.SIGINT, 128 + signal.SIGINT), err
    assert "KeyboardInterrupt" in err
    assert "BackgroundSampler" not in err  # the learner's interrupt, nothing else
    assert_nothing_left(process, pids)


@pytest.mark.timeout(90)
def test_ctrl_c_handled_by_the_learner_lets_it_finish_the_iteration(tmp_path):
    """A learner that turns Ctrl-C into a stop request (as a runner does) trains
    on one more batch: the background process must not die of the SIGINT the
    terminal sends to the whole group."""
    process, pids = run_until_training(tmp_path, "stop")
    try:
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            end_processes(process, pids, own_group=True)
    assert process.returncode == 0, err
    assert out.startswith("stopped after batch "), (out, err)
    assert_nothing_left(process, pids)
