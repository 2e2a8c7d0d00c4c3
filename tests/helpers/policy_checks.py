"""Checks of the policy a training example exported into its run directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from parllel.torch import load_policy
from parllel.tree import tree_map


def check_exported_policy(run_dir: Path, env_steps: int, algorithm: str) -> None:
    """``policy.pt`` loads and acts; the newest checkpoint gives the same policy."""
    policy = load_policy(run_dir)
    assert policy.source == run_dir / "policy.pt"
    assert policy.trained_with["env_steps"] == env_steps
    assert policy.trained_with["algorithm"] == algorithm
    space = policy.observation_space
    space.seed(0)
    batch = tree_map(
        lambda *leaves: np.stack(leaves), *[space.sample() for _ in range(8)]
    )
    actions = policy.act(batch)
    one = tree_map(lambda leaf: leaf[0], batch)
    policy.reset()  # a recurrent policy: from 8 envs to 1
    assert policy.action_space.contains(policy.act(one))
    # the same policy from the run's checkpoint (Runner.save's layout)
    aside = run_dir / "policy.pt.aside"
    (run_dir / "policy.pt").rename(aside)
    try:
        from_checkpoint = load_policy(run_dir)
        assert from_checkpoint.source.parent.name == "checkpoints"
        np.testing.assert_array_equal(from_checkpoint.act(batch), actions)
    finally:
        aside.rename(run_dir / "policy.pt")
