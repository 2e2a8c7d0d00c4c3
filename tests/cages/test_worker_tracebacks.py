"""A worker's traceback names the user's file and line for code sent by value.

An env class defined in the main script reaches the workers by value
(cloudpickle); its code keeps the file name it was compiled under, which a
worker may not be able to read (a notebook cell) or which is a pseudo-file
(a tool that ran the script with ``exec``). The workers register the
parent's source lines (parllel/cages/code_sources.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(200)

SCRIPT = """\
import gymnasium as gym
import numpy as np

from parllel.cages import ProcessCage, ProcessLayout


class FailingEnv(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        raise RuntimeError("boom in the user's step")


def main():
    cage = ProcessCage(FailingEnv, 2, layout=ProcessLayout(n_workers=1))
    cage.close()


if __name__ == "__main__":
    main()
"""
FAILING_SOURCE = 'raise RuntimeError("boom in the user\'s step")'
FAILING_LINE = SCRIPT.splitlines().index(8 * " " + FAILING_SOURCE) + 1

# a tool that runs the script with exec under a pseudo-file name
EXEC_LAUNCHER = """\
import sys

if __name__ == "__main__":
    path = sys.argv[1]
    code = compile(open(path).read(), "<dynamic-code>", "exec")
    exec(code, {"__name__": "__main__", "__file__": path})
"""

# a notebook: the cell's source lives only in the parent's linecache
CELL_LAUNCHER = """\
import linecache
import sys

if __name__ == "__main__":
    source = open(sys.argv[1]).read()
    lines = source.splitlines(keepends=True)
    linecache.cache["<cell-1>"] = (len(source), None, lines, "<cell-1>")
    exec(compile(source, "<cell-1>", "exec"), {"__name__": "__main__"})
"""


def run(tmp_path: Path, launcher: str | None) -> str:
    (tmp_path / "failing_env.py").write_text(SCRIPT)
    command = [sys.executable, "failing_env.py"]
    if launcher is not None:
        (tmp_path / "launcher.py").write_text(launcher)
        command = [sys.executable, "launcher.py", "failing_env.py"]
    result = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert result.returncode != 0
    assert "EnvError" in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "launcher, shown_file",
    [(None, "failing_env.py"), (EXEC_LAUNCHER, "failing_env.py")],
    ids=["script", "exec-under-a-pseudo-file"],
)
def test_worker_traceback_names_the_scripts_file_and_line(
    tmp_path, launcher, shown_file
):
    stderr = run(tmp_path, launcher)
    worker_part = stderr.split("--- worker traceback ---")[1]
    assert f'{shown_file}", line {FAILING_LINE}, in step' in worker_part
    assert FAILING_SOURCE in worker_part
    assert "<dynamic-code>" not in worker_part


def test_worker_traceback_shows_a_notebook_cells_line(tmp_path):
    stderr = run(tmp_path, CELL_LAUNCHER)
    worker_part = stderr.split("--- worker traceback ---")[1]
    assert f'File "<cell-1>", line {FAILING_LINE}, in step' in worker_part
    assert FAILING_SOURCE in worker_part
