"""A script that starts workers without the __main__ guard gets a ConfigError saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parllel.cages import ProcessCage
from parllel.cages.main_guard import guarded_lines
from parllel.errors import WorkerDiedError
from tests.helpers.envs import CountingEnv

ROOT = Path(__file__).resolve().parents[2]

# The README's training-script pattern, pasted into a file without the guard.
UNGUARDED = """
import gymnasium as gym
from parllel.cages import CageOptions, build_cage


def make_env():
    return gym.make("CartPole-v1")


cage = build_cage(make_env, n_envs=2, parallel="process", options=CageOptions(seed=0){kwargs})
print("built", cage.n_envs, flush=True)
cage.close()
"""

GUARDED = """
import gymnasium as gym
from parllel.cages import CageOptions, build_cage


def make_env():
    return gym.make("CartPole-v1")


def main():
    cage = build_cage(make_env, n_envs=2, parallel="process", options=CageOptions(seed=0){kwargs})
    print("built", cage.n_envs, flush=True)
    cage.close()


if __name__ == "__main__":
    main()
"""

# unguarded, but the cage is built in a function called from the top level
UNGUARDED_CALL = GUARDED.replace('if __name__ == "__main__":\n    main()', "main()")


def run_script(
    tmp_path: Path, source: str, kwargs: str = "", as_module: bool = False
) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(source.format(kwargs=kwargs))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's parllel
    command = ["-m", "train"] if as_module else [str(script)]
    return subprocess.run(
        [sys.executable, *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )


@pytest.mark.parametrize(
    "start_method, as_module",
    [("forkserver", False), ("spawn", False), ("forkserver", True)],
    ids=["forkserver", "spawn", "python-m"],
)
@pytest.mark.parametrize("source", [UNGUARDED, UNGUARDED_CALL], ids=["top", "call"])
def test_unguarded_script_gets_a_config_error_naming_the_guard(
    tmp_path, source, start_method, as_module
):
    kwargs = "" if start_method == "forkserver" else ', start_method="spawn"'
    result = run_script(tmp_path, source, kwargs, as_module)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "parllel.errors.ConfigError: ProcessCage workers are started"
    )
    assert 'if __name__ == "__main__":' in last
    assert 'parallel="serial"' in last  # the other way out
    # the top-level line of the script that is running
    lines = source.format(kwargs=kwargs).splitlines()
    running = 1 + next(
        i for i, text in enumerate(lines) if text.startswith(("cage =", "main()"))
    )
    assert f"train.py, line {running}: {lines[running - 1]}" in last
    assert start_method in last
    # no worker ever started: no misleading death report, no bootstrapping noise
    assert "WorkerDiedError" not in result.stderr
    assert "on_worker_death" not in result.stderr
    assert "bootstrapping phase" not in result.stderr
    assert "built" not in result.stdout


@pytest.mark.parametrize("as_module", [False, True], ids=["path", "python-m"])
def test_guarded_script_runs(tmp_path, as_module):
    result = run_script(tmp_path, GUARDED, as_module=as_module)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built 2"


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="auto picks serial on one core anyway"
)
def test_auto_falls_back_to_serial_with_a_warning_in_an_unguarded_script(tmp_path):
    source = UNGUARDED.replace('parallel="process"', 'parallel="auto"')
    result = run_script(
        tmp_path, source.replace("print(", "print(type(cage).__name__, ")
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "SerialCage built 2"
    assert "ParllelWarning" in result.stderr
    assert "train.py:" in result.stderr  # the warning points at the script's line


def test_unguarded_script_with_fork_is_fine(tmp_path):
    result = run_script(tmp_path, UNGUARDED, ', start_method="fork"')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built 2"


@pytest.mark.parametrize(
    "source, inside",
    [
        ('if __name__ == "__main__":\n    x = 1\n    y = 2\nz = 3\n', {2, 3}),
        ("if '__main__' == __name__:\n    x = (\n        1)\n", {2, 3}),
        (
            'try:\n    if __name__ == "__main__":\n        x = 1\nfinally:\n    y = 2\n',
            {3},
        ),
        ('if __name__ != "__main__":\n    x = 1\nelse:\n    y = 2\n', {4}),
        ('if __name__ == "__mp_main__":\n    x = 1\n', set()),
        ('if __name__ < "__main__":\n    x = 1\n', set()),
    ],
)
def test_guarded_lines(tmp_path, source, inside):
    path = tmp_path / "script.py"
    path.write_text(source)
    assert guarded_lines(str(path)) == inside


def test_unreadable_source_reports_nothing(tmp_path):
    assert guarded_lines(str(tmp_path / "missing.py")) is None
    path = tmp_path / "broken.py"
    path.write_text("def (:\n")
    assert guarded_lines(str(path)) is None


def _dies_in_workers():
    import multiprocessing as mp

    if mp.current_process().name.startswith("parllel-worker-"):
        os._exit(3)
    return CountingEnv()


def test_a_worker_dying_at_start_up_gets_no_restart_hint():
    with pytest.raises(
        WorkerDiedError, match="exited with code 3 before it was ready"
    ) as info:
        ProcessCage(_dies_in_workers, 2, start_method="fork", on_worker_death="restart")
    assert "on_worker_death" not in str(info.value)
    assert info.value.exitcode == 3


def test_code_without_a_main_file_is_not_flagged(tmp_path):
    """``python -c`` (like a notebook) has no main file for workers to re-run."""
    code = UNGUARDED.format(kwargs="")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built 2"


# A multi-line top-level statement: the message quotes all of it.
UNGUARDED_WITH = """
import gymnasium as gym
from parllel.cages import ProcessCage


def make_env():
    return gym.make("CartPole-v1")


with ProcessCage(
    make_env, n_envs=2, start_timeout=60.0
) as cage:
    # the body
    print("built", cage.n_envs, flush=True)
"""


def test_multi_line_statement_is_quoted_whole(tmp_path):
    result = run_script(tmp_path, UNGUARDED_WITH)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert (
        "train.py, lines 10-12: with ProcessCage(make_env, n_envs=2, "
        "start_timeout=60.0) as cage:), outside" in last
    )
    assert "the body" not in last
    assert "built" not in result.stdout


def run_from_stdin(
    tmp_path: Path, source: str, args: tuple[str, ...] = ("-",)
) -> subprocess.CompletedProcess:
    """``python - < script.py`` (or a heredoc: ``python`` with the script on stdin)."""
    return subprocess.run(
        [sys.executable, *args],
        input=source,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=100,
    )


@pytest.mark.parametrize("args", [("-",), ()], ids=["dash", "heredoc"])
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_script_from_stdin_gets_a_config_error_saying_to_save_it(
    tmp_path, args, start_method
):
    kwargs = "" if start_method == "forkserver" else ', start_method="spawn"'
    result = run_from_stdin(tmp_path, GUARDED.format(kwargs=kwargs), args)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("parllel.errors.ConfigError: ProcessCage cannot start")
    assert "standard input" in last and "Save the script to a file" in last
    assert repr(start_method) in last and 'start_method="fork"' in last
    # caught before any worker started: no worker's FileNotFoundError, no death
    assert "FileNotFoundError" not in result.stderr
    assert "WorkerDiedError" not in result.stderr
    assert "built" not in result.stdout


def test_script_from_stdin_with_fork_is_fine(tmp_path):
    result = run_from_stdin(tmp_path, GUARDED.format(kwargs=', start_method="fork"'))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "built 2"


def test_deleted_main_script_gets_a_config_error(tmp_path):
    source = GUARDED.replace(
        "def main():\n", "def main():\n    os.remove(__file__)\n"
    ).replace("import gymnasium", "import os\nimport gymnasium")
    result = run_script(tmp_path, source)
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"{tmp_path / 'train.py'} does not exist" in last
    assert "WorkerDiedError" not in result.stderr


@pytest.mark.parametrize(
    "line, span",
    [
        (1, (1, 3)),  # a call over three lines
        (2, (1, 3)),
        (5, (4, 5)),  # the header of a for loop, not its body
        (7, (7, 9)),  # a multi-line statement nested in the loop's body
        (8, (7, 9)),
        (10, (10, 10)),
    ],
)
def test_statement_lines_span_the_whole_statement(tmp_path, line, span):
    from parllel.cages.main_guard import _statement_lines

    path = tmp_path / "script.py"
    path.write_text(
        "cage = make(\n"  # 1
        "    n=2,\n"  # 2
        ")\n"  # 3
        "for i in range(\n"  # 4
        "        3):\n"  # 5
        "    # a comment\n"  # 6
        "    x = f(\n"  # 7
        "        i,\n"  # 8
        "    )\n"  # 9
        "print(x)\n"  # 10
    )
    assert _statement_lines(str(path), line) == span
