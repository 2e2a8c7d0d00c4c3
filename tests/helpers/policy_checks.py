"""Checks of the policy a training example exported into its run directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from parllel.enjoy import make_env
from parllel.torch import load_policy
from parllel.tree import tree_map


def check_exported_policy(run_dir: Path, env_steps: int, algorithm: str) -> None:
    """``policy.pt`` loads and acts (on the env it records, too); the newest
    checkpoint gives the same policy."""
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
    # the env the export records (what `python -m parllel.enjoy RUN` plays)
    # gives observations the policy reads
    trained = policy.trained_with
    env = make_env(
        trained.get("env_factory") or trained["env_id"],
        env_id=trained.get("env_id"),
        directory=run_dir,  # a recorded file path is relative to the run directory
    )
    try:
        observation, _ = env.reset(seed=0)
        assert policy.observation_space.contains(observation), (
            trained,
            np.shape(observation),
            policy.observation_space,
        )
        policy.reset()
        assert policy.action_space.contains(policy.act(observation))
    finally:
        env.close()
    # the same policy from the run's checkpoint (Runner.save's layout)
    aside = run_dir / "policy.pt.aside"
    (run_dir / "policy.pt").rename(aside)
    try:
        from_checkpoint = load_policy(run_dir)
        assert from_checkpoint.source.parent.name == "checkpoints"
        np.testing.assert_array_equal(from_checkpoint.act(batch), actions)
    finally:
        aside.rename(run_dir / "policy.pt")
