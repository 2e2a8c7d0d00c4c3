"""``benchmarks/reproduce_cleanrl.py --quick``: both sides where CleanRL's
script and its Python are on this machine, parllel's side otherwise; the
JSON line, the results file and resuming from it.

Set ``CLEANRL_SCRIPT`` and ``CLEANRL_PYTHON`` (the script's docstring says
how to get them) to run CleanRL's side too; by default the test looks for
them where that docstring puts them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "reproduce_cleanrl.py"
CLEANRL_SCRIPT = Path(
    os.environ.get("CLEANRL_SCRIPT", "/tmp/cleanrl_ppo_continuous_action.py")
)
CLEANRL_PYTHON = Path(os.environ.get("CLEANRL_PYTHON", "/tmp/cleanrl-venv/bin/python"))
KEYS = {
    "halfcheetah_exact_vs_cleanrl_diff_ci",
    "hopper_exact_vs_cleanrl_diff_ci",
    "walker_exact_vs_cleanrl_diff_ci",
    "halfcheetah_truncation_effect",
    "seeds",
}


def run(*flags: str) -> tuple[str, dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", *flags],
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_reproduce_cleanrl_quick_runs_both_sides_and_resumes(tmp_path):
    both = CLEANRL_SCRIPT.is_file() and CLEANRL_PYTHON.is_file()
    flags = ["--results", str(tmp_path / "results.jsonl")]
    if both:
        flags += ["--cleanrl-script", str(CLEANRL_SCRIPT)]
        flags += ["--cleanrl-python", str(CLEANRL_PYTHON)]
    out, result = run(*flags)
    assert KEYS <= set(result)
    sides = {"exact", "default", "default_truncation"} | (
        {"cleanrl"} if both else set()
    )
    assert set(result["seeds"]["HalfCheetah-v4"]) == sides
    assert all(seeds == [1, 2] for seeds in result["seeds"]["HalfCheetah-v4"].values())
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").open()]
    assert len(records) == 2 * len(sides)  # every finished run kept
    assert all(r["episodes"] >= 1 for r in records)
    effect = result["halfcheetah_truncation_effect"]
    assert effect["low"] <= effect["diff"] <= effect["high"]
    if both:
        ci = result["halfcheetah_exact_vs_cleanrl_diff_ci"]
        assert ci["seeds"] == [2, 2] and ci["low"] <= ci["diff"] <= ci["high"]
    else:
        assert "CleanRL's side skipped" in out
        assert result["halfcheetah_exact_vs_cleanrl_diff_ci"] is None
    # a second call finds every run in the results file and runs none
    again, resumed = run(*flags)
    assert not re.search(r" seed \d+: ", again), again  # no run line printed
    assert resumed["table"] == result["table"]
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(records)
