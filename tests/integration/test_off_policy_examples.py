"""The off-policy examples run end to end in --quick mode (in a temporary cwd)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.policy_checks import check_exported_policy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's parllel


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "script, extra", [("cartpole/train_dqn.py", ["--prioritized", "--n-step", "3"])]
)
def test_example_quick(tmp_path, script, extra):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--quick", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "eval return" in done.stdout.splitlines()[-1]
    run_dirs = list((tmp_path / "runs").iterdir())
    assert len(run_dirs) == 1
    assert (run_dirs[0] / "logs" / "progress.csv").exists()
    assert any((run_dirs[0] / "checkpoints").iterdir())
    check_exported_policy(run_dirs[0], 1_024, "DQN")


@pytest.mark.parametrize(
    "name, flags",
    [
        # the synchronous runner's resume is tested in the default run by
        # tests/runners/test_off_policy_runner.py; the example's by this one
        pytest.param(
            "pendulum/train_sac.py",
            [],
            marks=[pytest.mark.slow, pytest.mark.timeout(120)],
        ),
        pytest.param(
            "pendulum/train_sac.py", ["--async"], marks=pytest.mark.timeout(120)
        ),
        pytest.param(
            "mujoco/train_sac.py",
            ["--console", "plain"],
            marks=[pytest.mark.slow, pytest.mark.timeout(120)],
        ),
        # the JAX SAC (no policy.pt; importing JAX and compiling take their
        # time): Pendulum in the default run
        pytest.param(
            "pendulum/train_sac.py",
            ["--backend", "jax"],
            marks=pytest.mark.timeout(240),
        ),
        pytest.param(
            "mujoco/train_sac.py",
            ["--console", "plain", "--backend", "jax"],
            marks=[pytest.mark.slow, pytest.mark.timeout(240)],
        ),
    ],
)
def test_sac_example_resumes(tmp_path, name, flags):
    if name.startswith("mujoco"):
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    jax = "jax" in flags
    if jax:
        pytest.importorskip("jax", reason="needs the jax extra")
    limit = 220 if jax else 110  # seconds per run
    script = str(EXAMPLES / name)
    first = subprocess.run(
        [sys.executable, script, "--quick", *flags], cwd=tmp_path, capture_output=True,
        text=True, timeout=limit, env=ENV,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    again = subprocess.run(
        [sys.executable, script, "--quick", "--total-steps", "600", "--resume",
         str(run_dir)],
        cwd=tmp_path, capture_output=True, text=True, timeout=limit, env=ENV,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "after 600 steps" in again.stdout.splitlines()[-1]
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        assert list(csv.DictReader(file))[-1]["train/return_mean"]
    if jax:  # resumed as a JAX run (the config's backend), which exports no policy
        assert "pi_loss" in again.stdout and not (run_dir / "policy.pt").exists()
        return
    check_exported_policy(run_dir, 600, "SAC")


@pytest.mark.timeout(240)
def test_jax_dqn_example_quick_and_resume(tmp_path):
    """CartPole DQN with --backend jax: a --quick run, then a resume to 1,536
    steps (agent, DQN state and replay from the checkpoint); the exported
    policy.npz acts greedily in numpy."""
    pytest.importorskip("jax", reason="needs the jax extra")
    script = str(EXAMPLES / "cartpole/train_dqn.py")
    first = subprocess.run(
        [sys.executable, script, "--quick", "--backend", "jax", "--prioritized",
         "--checkpoint-replay-contents"],
        cwd=tmp_path, capture_output=True, text=True, timeout=220, env=ENV,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert "eval return" in first.stdout.splitlines()[-1]
    (run_dir,) = (tmp_path / "runs").iterdir()
    again = subprocess.run(
        [sys.executable, script, "--quick", "--total-steps", "1536", "--resume",
         str(run_dir)],
        cwd=tmp_path, capture_output=True, text=True, timeout=220, env=ENV,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "after 1536 steps" in again.stdout.splitlines()[-1]
    with open(run_dir / "logs" / "progress.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert rows[-1]["train/return_mean"] and float(rows[-1]["algo/updates"]) > 0
    from parllel.export import load_numpy_policy

    policy = load_numpy_policy(run_dir)
    assert policy.source == run_dir / "policy.npz"
    assert policy.trained_with["env_steps"] == 1536
    actions = policy.act(np.zeros((3, 4), np.float32))
    assert actions.shape == (3,) and set(actions.tolist()) <= {0, 1}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_dqn_solves_cartpole(tmp_path, backend):
    """The CartPole DQN example's defaults reach a mean eval return of 475
    (it stops there) with either backend, on seed 0."""
    if backend == "jax":
        pytest.importorskip("jax", reason="needs the jax extra")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "cartpole/train_dqn.py"), "--backend",
         backend, "--console", "plain"],
        cwd=tmp_path, capture_output=True, text=True, timeout=880, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "reached --target-return 475" in done.stdout, done.stdout[-2000:]
