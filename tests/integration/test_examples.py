"""Every example runs with ``--quick`` and resumes from its run directory.

Each example is run in a subprocess, in a temporary working directory, as
the README shows it; the run directory must hold the config, metadata,
``progress.csv`` and a checkpoint. Then ``--resume <run dir> --total-steps N``
must continue from the checkpoint's step to ``N`` in the same directory, and
resuming once more (``N`` is now the run's config) must add nothing.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.policy_checks import check_exported_policy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPTS = [
    "cartpole/train_ppo.py",
    "cartpole/train_ppo.py --async",
    # its local Ray starts in the Ray tests' pytest-xdist worker (their group,
    # tests/distributed/conftest.py): one local Ray at a time on the machine
    pytest.param("cartpole/train_ppo_ray.py", marks=pytest.mark.xdist_group("ray")),
    "cartpole/train_ppo_recurrent.py",
    "pendulum/train_ppo.py",
    "mujoco/train_ppo.py",  # HalfCheetah-v4, episodes cut at 64 steps
    "atari/train_ppo.py",
    "atari/train_ppo.py --envs envpool",  # EnvPool's Breakout-v5 in place of ALE's
]
# The multi-agent examples export no policy.pt; their --quick runs and resumes
# are in tests/integration/test_multiagent_examples.py.
QUICK_STEPS = 512  # total_steps of every --quick config
RESUMED_STEPS = 768


def _run(
    script: str, cwd: Path, *args: str, quick: bool = True
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / script),
            *(["--quick"] if quick else []),
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's parllel
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


def _steps(progress_csv: Path) -> list[int]:
    with open(progress_csv, newline="") as file:
        return [int(float(row["time/env_steps"])) for row in csv.DictReader(file)]


def _last(progress_csv: Path, column: str) -> str:
    """The last row's value of ``column`` ('' where that row has none)."""
    with open(progress_csv, newline="") as file:
        return list(csv.DictReader(file))[-1].get(column) or ""


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_quick_run_and_resume(script, tmp_path):
    script, *flags = script.split()
    if "ray" in script:
        pytest.importorskip("ray", reason="needs the ray extra")
    if "mujoco" in script:
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    if "atari" in script:
        pytest.importorskip("ale_py", reason="needs the atari extra")
    if "envpool" in flags:
        pytest.importorskip("envpool", reason="needs the envpool extra")
    _run(script, tmp_path, *flags)
    (run_dir,) = (tmp_path / "runs").iterdir()
    for name in ("config.json", "metadata.json", "logs/progress.csv"):
        assert (run_dir / name).is_file(), name
    checkpoints = sorted((run_dir / "checkpoints").glob("checkpoint_*.pt"))
    assert [c.name for c in checkpoints] == [f"checkpoint_{QUICK_STEPS:012d}.pt"]
    steps = _steps(run_dir / "logs" / "progress.csv")
    assert steps and steps[-1] == QUICK_STEPS
    # the training-episode return column, where a --quick run ends episodes
    # (Pendulum's 200 steps and Atari games outlast one)
    if not any(name in script for name in ("pendulum", "atari")):
        assert _last(run_dir / "logs" / "progress.csv", "train/return_mean")
    check_exported_policy(run_dir, QUICK_STEPS, "PPO")

    done = _run(script, tmp_path, "--resume", str(run_dir), "--total-steps", "768")
    assert "eval return" in done.stdout
    assert list((tmp_path / "runs").iterdir()) == [run_dir]  # same directory
    resumed_steps = _steps(run_dir / "logs" / "progress.csv")
    assert resumed_steps[: len(steps)] == steps  # appended, not rewritten
    assert resumed_steps[-1] == RESUMED_STEPS
    assert all(step > QUICK_STEPS for step in resumed_steps[len(steps) :])
    assert (run_dir / "checkpoints" / f"checkpoint_{RESUMED_STEPS:012d}.pt").is_file()
    # the longer total is the run's config now (no --quick: config.json alone
    # gives the config): resuming again has nothing to do
    done = _run(script, tmp_path, "--resume", str(run_dir), quick=False)
    assert f"{RESUMED_STEPS} of total_steps {RESUMED_STEPS}" in done.stdout
    assert _steps(run_dir / "logs" / "progress.csv") == resumed_steps


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "flags",
    [
        ["--sampler", "alternating"],
        ["--rebalance"],
        ["--async", "--max-lag", "2", "--refresh", "step", "--vtrace"],
    ],
)
def test_ppo_example_sampler_layouts(flags, tmp_path):
    done = _run("cartpole/train_ppo.py", tmp_path, *flags)
    assert "eval return" in done.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert _steps(run_dir / "logs" / "progress.csv")[-1] == QUICK_STEPS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_atari_resume_refuses_other_training_episodes(tmp_path):
    """A gymnasium Atari run (an episode ends at a lost life) resumed with
    --envs envpool (whole games) is refused, naming the change."""
    pytest.importorskip("ale_py", reason="needs the atari extra")
    pytest.importorskip("envpool", reason="needs the envpool extra")
    script = EXAMPLES / "atari" / "train_ppo.py"
    _run("atari/train_ppo.py", tmp_path, "--console", "plain")
    (run_dir,) = (tmp_path / "runs").iterdir()
    done = subprocess.run(
        [sys.executable, str(script), "--resume", str(run_dir), "--envs", "envpool"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode != 0
    assert (
        "envs: checkpoint 'gymnasium', current 'envpool' (the training "
        "episodes: a lost life (gymnasium) or a whole game (envpool))"
    ) in done.stderr + done.stdout, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_atari_dqn_quick_run_and_resume(tmp_path, backend):
    """DQN on Pong with the one-frame replay: a --quick run, then a resume
    (the replay's frames come back from the checkpoint) to 768 steps; the
    JAX run (the Nature CNN in flax) exports policy.npz."""
    pytest.importorskip("ale_py", reason="needs the atari extra")
    if backend == "jax":
        pytest.importorskip("jax", reason="needs the jax extra")
    script = "atari/train_dqn.py"
    _run(script, tmp_path, "--console", "plain", "--backend", backend)
    (run_dir,) = (tmp_path / "runs").iterdir()
    for name in ("config.json", "metadata.json", "logs/progress.csv"):
        assert (run_dir / name).is_file(), name
    checkpoints = sorted((run_dir / "checkpoints").glob("checkpoint_*.pt"))
    assert [c.name for c in checkpoints] == [f"checkpoint_{QUICK_STEPS:012d}.pt"]
    assert _steps(run_dir / "logs" / "progress.csv")[-1] == QUICK_STEPS
    if backend == "torch":
        check_exported_policy(run_dir, QUICK_STEPS, "DQN")
    else:
        assert (run_dir / "policy.npz").is_file()
    done = _run(
        script, tmp_path, "--resume", str(run_dir), "--total-steps", "768",
        "--console", "plain",
    )  # fmt: skip
    assert "eval return" in done.stdout
    assert _steps(run_dir / "logs" / "progress.csv")[-1] == RESUMED_STEPS
    assert (run_dir / "checkpoints" / f"checkpoint_{RESUMED_STEPS:012d}.pt").is_file()
