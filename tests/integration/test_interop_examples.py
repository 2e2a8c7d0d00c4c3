"""The interop examples run end to end in --quick mode and end with one JSON line.

``cleanrl_ppo.py`` trains over ``parllel.interop.make_vec`` (a gymnasium
vector env), ``sb3_ppo.py`` over ``make_sb3_vec_env`` (an SB3 VecEnv; skipped
without Stable-Baselines3). Both run in a subprocess in a temporary working
directory, as their docstrings show them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "interop"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's parllel
QUICK_STEPS = 1024  # total_steps of both --quick presets


def _run(script: str, cwd: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--quick", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=110,
        env=ENV,
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(120)
def test_cleanrl_ppo_quick(tmp_path):
    summary = _run("cleanrl_ppo.py", tmp_path, "--seed", "3")
    assert summary["env_steps"] == QUICK_STEPS
    assert summary["episodes"] > 0
    # CartPole's return is the episode length: at least 8 steps, at most 500
    assert 8 <= summary["final_mean_return"] <= 500
    assert summary["solved"] is False and summary["steps_to_solved"] is None
    assert summary["seconds"] > 0


@pytest.mark.slow  # the adapter itself: tests/interop/test_sb3_vec_env.py
@pytest.mark.timeout(120)
def test_sb3_ppo_quick(tmp_path):
    pytest.importorskip("stable_baselines3", reason="needs the sb3 extra")
    summary = _run("sb3_ppo.py", tmp_path, "--seed", "3")
    assert summary["env_steps"] == QUICK_STEPS
    assert 8 <= summary["eval_mean_return"] <= 500
    assert summary["train_mean_return"] is not None
    assert summary["solved"] == (summary["eval_mean_return"] >= 475)
    assert set(summary) >= {"eval_std_return", "seconds", "eval_seconds"}
