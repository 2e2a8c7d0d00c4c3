"""Ctrl-C on a real training script: a checkpoint, the resume command, nothing left.

The example runs in its own session, as in a terminal, and SIGINT goes to its
whole process group, as a Ctrl-C does (worker processes get it too and must
ignore it). Progress is read from the script's output; nothing waits on a
clock except the overall deadlines, which fail the test if reached.
"""

from __future__ import annotations

import csv
import os
import selectors
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parllel.arrays.shared_memory import list_segments
from tests.helpers.processes import default_sigint, end_processes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cartpole" / "train_ppo.py"
BATCH = 256  # env steps per batch of the example (8 envs x 32 steps)
DEADLINE_S = 120


def _env() -> dict[str, str]:
    """Run the scripts against this checkout's parllel."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p),
    }


def _children(pid: int) -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(pid), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Script:
    """A training script in its own session, its merged output read as it comes."""

    def __init__(
        self,
        tmp_path: Path,
        *args: str,
        command: list[str] | None = None,
        background: bool = False,
    ):
        self.process = subprocess.Popen(
            command or [sys.executable, str(EXAMPLE), *args],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, like a terminal job
            # a shell script's `cmd &` starts its job with SIGINT ignored
            preexec_fn=_ignore_sigint if background else default_sigint,
        )
        self._fd = self.process.stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._data = b""
        self._eof = False

    def _read(self, timeout: float) -> None:
        if self._selector.select(timeout=timeout):
            chunk = os.read(self._fd, 1 << 16)  # unbuffered: nothing hides in a buffer
            self._eof = not chunk
            self._data += chunk

    def wait_for(self, text: str) -> None:
        """Read output until it contains ``text``; fail at the deadline or exit."""
        deadline = time.monotonic() + DEADLINE_S
        while text not in self.output:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {text!r} in output:\n{self.output}"
            assert not self._eof, f"exited before {text!r}:\n{self.output}"
            self._read(remaining)

    def ctrl_c(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)

    def finish(self) -> int:
        deadline = time.monotonic() + DEADLINE_S
        while not self._eof and time.monotonic() < deadline:
            self._read(deadline - time.monotonic())
        self._selector.close()
        return self.process.wait(timeout=DEADLINE_S)

    @property
    def output(self) -> str:
        return self._data.decode(errors="replace")

    def kill(self) -> None:
        end_processes(self.process, own_group=True)
        self.process.stdout.close()


def _assert_nothing_left(pid: int, processes: set[int]) -> None:
    deadline = time.monotonic() + 30  # the forkserver exits once its pipe closes
    while any(_alive(p) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in processes if _alive(p)], "child processes left behind"
    assert list_segments(pid) == []


def _steps(run_dir: Path) -> list[int]:
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        return [int(row["step"]) for row in csv.DictReader(file)]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ctrl_c_writes_a_checkpoint_prints_the_resume_command_and_resumes(tmp_path):
    script = Script(
        tmp_path,
        "--quick",
        "--total-steps", str(1_000 * BATCH),
        "--eval-interval-steps", str(BATCH),
        "--parallel", "process",
    )  # fmt: skip
    try:
        script.wait_for("steps/s (avg")  # the first log line: training is under way
        workers = _descendants(script.process.pid)
        assert workers, "the example should step its envs in worker processes"
        script.ctrl_c()
        code = script.finish()
    finally:
        script.kill()
    output = script.output
    assert code == 130, output
    assert "Ctrl-C: stopping after this iteration and writing a checkpoint" in output
    (run_dir,) = (tmp_path / "runs").iterdir()
    (checkpoint_line,) = [
        line for line in output.splitlines() if "checkpoint written:" in line
    ]
    checkpoint = tmp_path / checkpoint_line.split("checkpoint written:")[1].strip()
    assert checkpoint.is_file() and checkpoint.parent == run_dir / "checkpoints"
    stopped_at = int(checkpoint.stem.split("_")[1])
    assert 0 < stopped_at < 1_000 * BATCH
    assert _steps(run_dir)[-1] == stopped_at  # the step reached is logged
    (resume_line,) = [
        line for line in output.splitlines() if line.startswith("resume with: ")
    ]
    command = shlex.split(resume_line[len("resume with: ") :])
    assert command[-2:] == ["--resume", str(run_dir.relative_to(tmp_path))]
    _assert_nothing_left(script.process.pid, workers)

    # the printed command resumes the run (here told to stop 2 batches later)
    target = stopped_at + 2 * BATCH
    again = Script(tmp_path, command=[*command, "--total-steps", str(target)])
    try:
        code = again.finish()
    finally:
        again.kill()
    assert code == 0, again.output
    assert f"after {target} steps" in again.output
    steps = _steps(run_dir)
    assert steps == sorted(set(steps)) and steps[-1] == target  # continuous
    assert steps[-3:] == [stopped_at, stopped_at + BATCH, target]
    assert (run_dir / "learning_curve.png").is_file()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_second_ctrl_c_exits_at_once_without_leftovers(tmp_path):
    # epochs so many that the first update outlasts the test: only the second
    # Ctrl-C can end the run; total_steps off the batch grid makes run() say
    # that it started (after installing its Ctrl-C handler)
    script = Script(
        tmp_path,
        "--quick",
        "--epochs", "1000000",
        "--total-steps", str(1_000 * BATCH + 1),
        "--parallel", "process",
    )  # fmt: skip
    try:
        script.wait_for("ParllelWarning")  # run() has started
        workers = _descendants(script.process.pid)
        # a second of CPU later it is inside the first (endless) update, so
        # the first Ctrl-C cannot end the run before the iteration does
        start = _cpu_seconds(script.process.pid)
        while _cpu_seconds(script.process.pid) < start + 1.0:
            assert script.process.poll() is None, script.output
            time.sleep(0.05)
        script.ctrl_c()
        script.wait_for("Ctrl-C again to exit at once")
        script.ctrl_c()
        code = script.finish()
    finally:
        script.kill()
    assert code == 130, script.output
    assert "interrupted before the first checkpoint" in script.output
    assert "the run cannot be resumed" in script.output
    assert "resume with:" not in script.output
    assert "Traceback" not in script.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert list((run_dir / "checkpoints").glob("*")) == []  # no partial file either
    _assert_nothing_left(script.process.pid, workers)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_background_job_warns_that_ctrl_c_is_ignored_and_stops_on_sigterm(tmp_path):
    script = Script(
        tmp_path,
        "--quick",
        "--total-steps", str(1_000 * BATCH),
        "--eval-interval-steps", str(BATCH),
        "--parallel", "process",
        background=True,
    )  # fmt: skip
    try:
        script.wait_for("steps/s (avg")  # the first log line: training is under way
        workers = _descendants(script.process.pid)
        script.ctrl_c()  # ignored, as the warning says
        script.process.send_signal(signal.SIGTERM)
        code = script.finish()
    finally:
        script.kill()
    output = script.output
    assert code == 128 + signal.SIGTERM, output
    assert output.count("ParllelWarning") == 1
    assert f"kill {script.process.pid}" in output
    # the warning points at the example's own line, not into parllel
    (warning_line,) = [line for line in output.splitlines() if "SIGINT is ign" in line]
    assert warning_line.startswith(str(EXAMPLE)), warning_line
    assert "SIGTERM: stopping after this iteration and writing a checkpoint" in output
    assert "Ctrl-C:" not in output
    (checkpoint_line,) = [
        line for line in output.splitlines() if "checkpoint written:" in line
    ]
    checkpoint = tmp_path / checkpoint_line.split("checkpoint written:")[1].strip()
    assert checkpoint.is_file()
    assert "resume with: " in output
    _assert_nothing_left(script.process.pid, workers)
