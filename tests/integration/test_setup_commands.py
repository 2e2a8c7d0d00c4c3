"""The README's set-up commands are what CI runs, and the suite survives `cmd &`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import end_processes

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The two commands of the README's first ``bash`` block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README.md starts with no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def steps(command: str) -> list[str]:
    """A command's steps, ``python -m pip`` read as ``pip``, ``--quiet`` dropped."""
    out = []
    for part in command.split("&&"):
        words = [w for w in part.split() if w != "--quiet"]
        if words[:3] == ["python", "-m", "pip"]:
            words = ["pip", *words[3:]]
        out.append(" ".join(words))
    return out


def test_ci_runs_exactly_the_readme_test_command():
    """.ci/run installs what the README's test command installs, in that order,
    and runs the same pytest command: a fresh machine sees what CI sees."""
    commands = readme_commands()
    assert len(commands) == 2, commands
    wanted = steps(commands[1])
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    ci_steps = [  # a line's command: its comment and failure handling (||) left out
        s
        for line in ci
        if not line.lstrip().startswith("#") and line.strip()
        for s in steps(line.split("#")[0].split("||")[0])
    ]
    installs = [
        s for s in ci_steps if s.startswith("pip install") and "--upgrade" not in s
    ]
    tests = [s for s in ci_steps if s.startswith("python -m pytest")]
    assert installs == [s for s in wanted if s.startswith("pip install")]
    assert tests[0] == wanted[-1]


def test_ci_installs_into_a_fresh_virtual_environment():
    """.ci/run makes a new venv each run and installs into it, as on a new
    machine, and runs both test commands whatever the first gives."""
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.split("#")[0].strip() for line in ci.splitlines()]
    venv = next(i for i, c in enumerate(commands) if c.startswith("python -m venv"))
    activate = next(i for i, c in enumerate(commands) if c.startswith("source"))
    first_install = next(i for i, c in enumerate(commands) if "pip install" in c)
    assert venv < activate < first_install
    assert "mktemp -d" in ci and "trap" in ci  # new each run, removed at the end
    pytest_lines = [c for c in commands if c.startswith("python -m pytest")]
    assert len(pytest_lines) == 2 and all("|| failed=1" in c for c in pytest_lines)
    assert commands[-1] == 'exit "$failed"'
    mkdocs = next(c for c in commands if "mkdocs build" in c)
    assert "--strict" in mkdocs and "--quiet" not in mkdocs  # quiet hides warnings


def test_the_main_command_installs_a_subset_of_the_test_command():
    main, test = (steps(c) for c in readme_commands())
    assert main[0] == test[0] == "pip install torch==2.13.0"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.timeout(150)
def test_ctrl_c_tests_pass_in_a_run_started_as_a_background_job(tmp_path):
    """``nohup python -m pytest &`` starts pytest with SIGINT ignored; the tests
    that send SIGINT must not inherit that."""
    test = "tests/cages/test_cage_cleanup.py::test_no_leftovers[sigint]"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_ignore_sigint,
    )
    try:
        output, _ = process.communicate(timeout=120)
    finally:  # whatever the inner run left in its group ends here
        end_processes(process, own_group=True)
    assert process.returncode == 0, output[-3000:]
