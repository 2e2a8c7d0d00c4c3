"""``--seeds 2`` on the JAX PPO examples: a --quick run of two seeds in one
program writes two ordinary run directories, then resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_examples import QUICK_STEPS, RESUMED_STEPS, _run, _steps


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
