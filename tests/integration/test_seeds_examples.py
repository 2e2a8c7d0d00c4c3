"""``--seeds 2`` on the JAX PPO and SAC examples: a --quick run of two seeds in one
program writes two ordinary run directories (each with its exported policy),
then resumes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_examples import (
    EXAMPLES,
    QUICK_STEPS,
    RESUMED_STEPS,
    ROOT,
    _run,
    _steps,
)


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("script", ["cartpole/train_ppo.py", "mujoco/train_ppo.py"])
def test_seeds_example_quick_run_and_resume(script: str, tmp_path: Path) -> None:
    pytest.importorskip("jax", reason="needs the jax extra")
    if "mujoco" in script:
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    _run(script, tmp_path, "--backend", "jax", "--seeds", "2")
    (group,) = (tmp_path / "runs").iterdir()
    runs = sorted(p for p in group.iterdir() if p.name.startswith("seed"))
    assert [p.name.split("-")[0] for p in runs[:2]] == ["seed0", "seed1"]
    for run in runs[:2]:
        checkpoints = sorted((run / "checkpoints").glob("checkpoint_*.pt"))
        assert checkpoints[-1].name == f"checkpoint_{QUICK_STEPS:012d}.pt"
        assert _steps(run / "logs" / "progress.csv")[-1] == QUICK_STEPS
        assert (run / "policy.npz").is_file() and (run / "policy_spec.json").is_file()
    assert (group / "learning_curve.png").is_file()
    _run(
        script,
        tmp_path,
        "--backend",
        "jax",
        "--seeds",
        "2",
        "--resume",
        str(group),
        "--total-steps",
        str(RESUMED_STEPS),
    )
    for run in runs[:2]:
        assert _steps(run / "logs" / "progress.csv")[-1] == RESUMED_STEPS


@pytest.mark.slow
@pytest.mark.timeout(500)
@pytest.mark.parametrize("script", ["pendulum/train_sac.py", "mujoco/train_sac.py"])
def test_sac_seeds_example_quick_run_and_resume(script: str, tmp_path: Path) -> None:
    pytest.importorskip("jax", reason="needs the jax extra")
    if "mujoco" in script:
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    flags = ["--backend", "jax", "--seeds", "2", "--console", "plain"]
    _run_slowly(script, tmp_path, *flags)
    (group,) = (tmp_path / "runs").iterdir()
    runs = sorted(p for p in group.iterdir() if p.name.startswith("seed"))
    assert [p.name.split("-")[0] for p in runs[:2]] == ["seed0", "seed1"]
    for run in runs[:2]:  # the SAC --quick runs are 400 steps
        checkpoints = sorted((run / "checkpoints").glob("checkpoint_*.pt"))
        assert checkpoints[-1].name == f"checkpoint_{400:012d}.pt"
        assert _steps(run / "logs" / "progress.csv")[-1] == 400
        assert (run / "policy.npz").is_file() and (run / "policy_spec.json").is_file()
    _run_slowly(
        script, tmp_path, *flags, "--resume", str(group), "--total-steps", "600"
    )
    for run in runs[:2]:
        assert _steps(run / "logs" / "progress.csv")[-1] == 600


def _run_slowly(script: str, cwd: Path, *args: str) -> None:
    """``_run`` with time for importing JAX and compiling on a loaded machine."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--quick", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
