"""Ctrl-C, interpreter exit and a killed main process leave no worker and no shared memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments
from tests.helpers.processes import default_sigint, end_processes

ROOT = Path(__file__).resolve().parents[2]  # tests.helpers import from here

SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from tests.helpers.cage_helpers import allocate, slots
    from tests.helpers.envs import CountingEnv
    from parllel.cages import CageOptions, ProcessCage, ProcessLayout

    if __name__ == "__main__":
        layout = ProcessLayout(envs_per_worker=2)
        cage = ProcessCage(CountingEnv, 4, layout=layout, options=CageOptions(seed=0))
        tree = allocate(cage, 8)
        cage.reset(tree.observation[0])
        print("PIDS", *cage.worker_pids, flush=True)
        mode = sys.argv[1]
        if mode == "exit":
            sys.exit(0)  # no close(): interpreter exit must clean up
        while True:
            for t in range(8):
                cage.step(tree.action[t], slots(tree, t))
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # exited while we read
        return False


def _stop(proc: subprocess.Popen, mode: str) -> None:
    signals = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}
    signals["sigkill"] = signal.SIGKILL
    if mode in signals:
        time.sleep(0.3)
        proc.send_signal(signals[mode])
    proc.wait(timeout=30)


@pytest.mark.parametrize("mode", ["sigint", "exit", "sigterm", "sigkill"])
def test_no_leftovers(mode, tmp_path):
    script = tmp_path / "run_cage.py"
    script.write_text(SCRIPT.format(tests=str(ROOT)))
    proc = subprocess.Popen(
        [sys.executable, str(script), mode],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    pids: list[int] = []
    try:
        line = proc.stdout.readline()
        assert line.startswith("PIDS"), line
        pids = [int(p) for p in line.split()[1:]]
        _stop(proc, mode)
    finally:  # a failed wait must not leave the script stepping for ever
        if proc.poll() is None:
            end_processes(proc, pids)
        proc.stdout.close()
    # a killed main process cleans nothing up itself: its workers notice it is
    # gone and exit, the resource tracker removes its segments
    deadline = time.monotonic() + 10
    while (
        any(_alive(p) for p in pids) or list_segments(proc.pid)
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]
    assert list_segments(proc.pid) == []
