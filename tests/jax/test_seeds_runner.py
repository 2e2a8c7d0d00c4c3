"""SeedsRunner: K ordinary run directories (progress.csv, checkpoints, resume)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from parllel.builders import add_advantage_estimation, build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.checkpoints.checkpoint import load_latest_checkpoint
from parllel.errors import ConfigError, ParllelWarning
from parllel.jax.agents import build_actor_critic_agent
from parllel.jax.algos import PPO, SeededPPO, adam
from parllel.jax.seeds import RunView, SeededHandler, SeedStack
from parllel.logging.csv_sink import read_progress
from parllel.plot import plot_learning_curve
from parllel.runners import RunSettings
from parllel.runners.seed_runs import start_seed_runs
from parllel.runners.seeds import SeedsRunner
from parllel.samplers import FeedForwardSampler
from parllel.transforms import Compose, Transform

K, B, T = 2, 2, 16


@dataclasses.dataclass
class Config:
    seed: int = 5
    total_steps: int = 3 * T * B


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


class PoisonRun1(Transform):
    """Sets run 1's advantages to NaN in the second batch."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, sample_tree: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            sample_tree["advantage"][:, B] = np.nan
        return sample_tree


def build(
    run_root: Path,
    resume: str | None = None,
    normalize: bool = False,
    poison: bool = False,
    total_steps: int = 3 * T * B,
) -> Any:
    config = Config(total_steps=total_steps)
    settings = RunSettings(
        run_root=str(run_root),
        console="plain",
        log_interval_steps=T * B,
        checkpoint_interval_steps=2 * T * B,
    )
    runs = start_seed_runs(
        settings, "test", config, seeds=K, master=config.seed, n_envs=B, resume=resume
    )
    cage = build_cage(
        make_env, K * B, parallel="serial", options=CageOptions(seed=runs.env_seeds)
    )
    stack = SeedStack(
        [
            build_actor_critic_agent(
                cage.spaces.observation,
                cage.spaces.action,
                seed=s.torch,
                hidden_sizes=(8,),
            )
            for s in runs.seeds
        ]
    )
    handler = SeededHandler(stack, B, seeds=[s.actions for s in runs.seeds])
    sample_tree = build_sample_tree([cage], handler, T)
    transform = Compose(
        [
            *add_advantage_estimation(sample_tree, 0.99, 0.95, normalize=normalize),
            *([PoisonRun1()] if poison else []),
        ]
    )
    sampler = FeedForwardSampler([cage], handler, sample_tree, transform=transform)
    ppos = [
        PPO(agent, adam(1e-3), epochs=1, minibatches=2, seed=s.torch)
        for agent, s in zip(stack.agents, runs.seeds)
    ]
    seeded = SeededPPO(
        ppos,
        stack,
        envs_per_run=B,
        seeds=[s.master for s in runs.seeds],
        on_nonfinite="stop_run" if poison else "stop_all",
    )
    runner = SeedsRunner(
        sampler,
        seeded,
        config.total_steps,
        runs.seed_runs(
            lambda k: {"model": RunView(stack, k), "ppo": seeded.run_state(k)},
            handler.action_key,
        ),
        **runs.runner_options(config.total_steps),
    )
    return runs, runner, (cage, sample_tree)


@pytest.mark.slow
def test_runs_write_ordinary_directories_and_resume(tmp_path: Path) -> None:
    runs, runner, close = build(tmp_path)
    results = runs.train(runner, close=close)
    assert len(results) == K and all("algo/policy_loss" in r for r in results)
    for seeds, directory in zip(runs.seeds, runs.directories):
        progress = read_progress(directory.progress_csv)
        assert list(progress["step"]) == [T * B, 2 * T * B, 3 * T * B]
        assert directory.seeds() is not None
        assert directory.seeds().master == seeds.master
        _, state = load_latest_checkpoint(directory.checkpoints_dir)
        assert state["runner"]["env_steps"] == 3 * T * B
        assert set(state["objects"]) == {"model", "ppo"}
        assert "actions" in state["rng"]["generators"]
    # the runs' weights differ (own seeds), the group has its plot
    first, second = (
        load_latest_checkpoint(d.checkpoints_dir)[1]["objects"]["model"]["params"]
        for d in runs.directories
    )
    assert not np.array_equal(
        np.concatenate([np.ravel(x) for x in _leaves(first)]),
        np.concatenate([np.ravel(x) for x in _leaves(second)]),
    )
    assert (runs.path / "learning_curve.png").is_file()
    assert plot_learning_curve(runs.path) == runs.path / "learning_curve.png"

    # resume with more steps: each run continues from its checkpoint
    # (warned and recorded as a single run's resume: group and every run)
    resumed, runner, close = build(
        tmp_path, resume=str(runs.path), total_steps=4 * T * B
    )
    with pytest.warns(ParllelWarning, match="total_steps=128"):
        resumed.train(runner, close=close)
    for directory in resumed.directories:
        progress = read_progress(directory.progress_csv)
        assert list(progress["step"]) == [T * B, 2 * T * B, 3 * T * B, 4 * T * B]
    for directory in [resumed.group, *resumed.directories]:
        assert directory.read_config()["total_steps"] == 4 * T * B
        (record,) = directory.read_metadata()["resumes"]
        assert record["step"] == 3 * T * B
        assert record["config_changes"] == {"total_steps": [3 * T * B, 4 * T * B]}
    for directory in resumed.directories:
        (record,) = directory.read_metadata()["resumes"]
        assert record["checkpoint"].startswith(str(directory.checkpoints_dir))


@pytest.mark.slow
def test_a_failing_run_stops_alone(tmp_path: Path) -> None:
    runs, runner, close = build(tmp_path, poison=True)
    with pytest.warns(ParllelWarning, match="seed 6"):
        results = runs.train(runner, close=close)
    assert results[1] == {} and "algo/policy_loss" in results[0]
    healthy, failed = runs.directories
    assert list(read_progress(healthy.progress_csv)["step"])[-1] == 3 * T * B
    assert list(read_progress(failed.progress_csv)["step"]) == [T * B]
    stopped = failed.read_metadata()["stopped"]
    assert stopped["env_steps"] == 2 * T * B and "seed 6" in stopped["error"]
    _, state = load_latest_checkpoint(failed.checkpoints_dir)
    assert state["runner"]["env_steps"] == 2 * T * B  # its last finite weights


@pytest.mark.slow
def test_refuses_pooled_normalizers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="NormalizeAdvantage"):
        build(tmp_path, normalize=True)


def _leaves(tree: Any) -> list:
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    return [tree]
