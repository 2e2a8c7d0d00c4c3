"""The PPO examples run with ``--backend jax``: a --quick run, then a resume.

As tests/integration/test_examples.py, without the policy export (a JAX run
writes no policy.pt).
"""

from __future__ import annotations

import pytest

from tests.integration.test_examples import QUICK_STEPS, RESUMED_STEPS, _run, _steps


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("script", ["cartpole/train_ppo.py", "mujoco/train_ppo.py"])
def test_jax_example_quick_run_and_resume(script, tmp_path):
    pytest.importorskip("jax", reason="needs the jax extra")
    if "mujoco" in script:
        pytest.importorskip("mujoco", reason="needs the mujoco extra")
    _run(script, tmp_path, "--backend", "jax")
    (run_dir,) = (tmp_path / "runs").iterdir()
    checkpoints = sorted((run_dir / "checkpoints").glob("checkpoint_*.pt"))
    assert [c.name for c in checkpoints] == [f"checkpoint_{QUICK_STEPS:012d}.pt"]
    steps = _steps(run_dir / "logs" / "progress.csv")
    assert steps[-1] == QUICK_STEPS
    done = _run(
        script,
        tmp_path,
        "--backend",
        "jax",
        "--resume",
        str(run_dir),
        "--total-steps",
        str(RESUMED_STEPS),
    )
    assert "eval return" in done.stdout
    resumed = _steps(run_dir / "logs" / "progress.csv")
    assert resumed[: len(steps)] == steps and resumed[-1] == RESUMED_STEPS


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_jax_backend_refuses_async(tmp_path):
    pytest.importorskip("jax", reason="needs the jax extra")
    with pytest.raises(AssertionError, match="--backend jax samples synchronously"):
        _run("cartpole/train_ppo.py", tmp_path, "--backend", "jax", "--async")
