"""The PPO examples run with ``--backend jax``: a --quick run, then a resume.

As tests/integration/test_examples.py; the policy export is a JAX run's
policy.npz (tests/jax/test_jax_policy_export.py checks its actions).
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
    check_numpy_export(run_dir, QUICK_STEPS)
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
    check_numpy_export(run_dir, RESUMED_STEPS)


def check_numpy_export(run_dir, env_steps):
    """The run's policy.npz loads (in numpy) at ``env_steps`` and acts."""
    from parllel.export import load_numpy_policy

    policy = load_numpy_policy(run_dir)
    assert policy.source == run_dir / "policy.npz"
    assert policy.trained_with["env_steps"] == env_steps
    assert policy.trained_with["algorithm"] == "PPO"
    space = policy.observation_space
    space.seed(0)
    assert policy.action_space.contains(policy.act(space.sample()))


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_jax_backend_refuses_async(tmp_path):
    pytest.importorskip("jax", reason="needs the jax extra")
    with pytest.raises(AssertionError, match="--backend jax samples synchronously"):
        _run("cartpole/train_ppo.py", tmp_path, "--backend", "jax", "--async")
