"""benchmarks/device_check.py cannot waste its one run on a GPU machine:
every finished section is printed at once, a failing configuration is
reported and skipped, the whole run stays within its budget, and the wheel
script builds no wheel of parllel (the device command puts the source on
the path)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from _sections import attempt, run_section  # noqa: E402


def test_a_section_is_printed_as_soon_as_it_ends_even_when_it_fails(capsys):
    def measure(box, out):
        out["first"] = 1.0
        raise RuntimeError("the second configuration crashed")

    results: dict = {}
    run_section("demo", 5.0, measure, results)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["section"] == "demo" and line["first"] == 1.0
    assert "crashed" in line["error"]
    assert results["demo"]["first"] == 1.0


def test_a_failing_configuration_is_reported_and_the_section_moves_on(capsys):
    def broken() -> dict:
        raise ValueError("no such env")

    assert attempt("collect cnn", broken) == {"error": "ValueError: no such env"}
    assert attempt("collect mlp", lambda: {"sps": 2.0}) == {"sps": 2.0}
    assert "[collect cnn] failed" in capsys.readouterr().err


@pytest.mark.slow  # ~15 s: the quick run's first sections, cut by the budget
@pytest.mark.timeout(120)
def test_the_whole_run_stays_within_its_budget():
    budget = 12.0
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "device_check.py"), "--quick"]
        + ["--budget", str(budget)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    wall = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line[:1] == "{"]
    assert lines[0]["section"] == "prerequisites"
    summary = lines[-1]
    assert summary["seconds"] <= budget
    assert wall <= budget + 15  # the interpreter and imports before its clock starts
    assert "budget is spent" in done.stderr


def test_the_wheel_script_builds_no_wheel_of_parllel():
    script = (BENCHMARKS / "device_wheels.sh").read_text()
    assert "pip wheel" not in script and "bdist_wheel" not in script
    docs = (BENCHMARKS.parent / "docs" / "gpu.md").read_text()
    assert "export PYTHONPATH=/tmp/site:$PWD" in docs
