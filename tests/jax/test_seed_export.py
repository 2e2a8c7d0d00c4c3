"""A seed group's runs each export their policy (policy.npz, policy_spec.json)
as a single run does: run k's parameters and run k's normalizer statistics."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import jax
import numpy as np
import pytest

from parllel.builders import (
    add_advantage_estimation,
    add_obs_normalization,
    build_sample_tree,
)
from parllel.cages import CageOptions, build_cage
from parllel.enjoy import main as enjoy
from parllel.export.numpy_policy import load_numpy_policy
from parllel.export.spec import SPEC_FILE, read_policy_spec
from parllel.jax.agents import build_actor_critic_agent, build_sac_agent
from parllel.jax.agents.sac_agent import SacPolicyParams
from parllel.jax.algos import (
    PPO,
    SAC,
    EntropyCoefficient,
    SeededPPO,
    SeededSAC,
    adam,
    build_sac_optimizers,
)
from parllel.jax.export import PolicyExport, export_policy, write_policy_spec
from parllel.jax.seeds import RunView, SeededHandler, SeedStack
from parllel.runners import RunSettings
from parllel.runners.seed_runs import start_seed_runs
from parllel.runners.seeds import SeedsRunner
from parllel.samplers import FeedForwardSampler
from parllel.seeding import Seeds
from parllel.transforms import Compose, PerRunObservations

K, B, T = 2, 2, 8


@dataclasses.dataclass
class Config:
    seed: int = 5
    total_steps: int = 2 * T * B


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def _observations(space: gym.Space, n: int = 256) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.normal(0.0, 2.0, (n, *np.shape(space.sample()))).astype(np.float32)


def _greedy(agent: Any, params: Any, observations: np.ndarray) -> np.ndarray:
    actions, _ = agent.policy_step(
        params, observations, jax.random.key(0), deterministic=True
    )
    return np.asarray(actions)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_each_seed_run_exports_its_own_policy(tmp_path: Path) -> None:
    config = Config()
    settings = RunSettings(run_root=str(tmp_path), console="plain")
    runs = start_seed_runs(
        settings, "test", config, seeds=K, master=config.seed, n_envs=B
    )
    cage = build_cage(
        make_env, K * B, parallel="serial", options=CageOptions(seed=runs.env_seeds)
    )
    spaces = cage.spaces
    stack = SeedStack(
        [
            build_actor_critic_agent(
                spaces.observation, spaces.action, seed=s.torch, hidden_sizes=(8,)
            )
            for s in runs.seeds
        ]
    )
    handler = SeededHandler(stack, B, seeds=[s.actions for s in runs.seeds])
    sample_tree = build_sample_tree([cage], handler, T)
    normalizer = PerRunObservations(
        [add_obs_normalization(sample_tree) for _ in range(K)], B
    )
    sampler = FeedForwardSampler(
        [cage],
        handler,
        sample_tree,
        transform=Compose(add_advantage_estimation(sample_tree, 0.99, 0.95)),
        observation_normalizer=normalizer,
    )
    seeded = SeededPPO(
        [
            PPO(agent, adam(1e-3), epochs=1, minibatches=1, seed=s.torch)
            for agent, s in zip(stack.agents, runs.seeds)
        ],
        stack,
        envs_per_run=B,
        seeds=[s.master for s in runs.seeds],
    )
    runner = SeedsRunner(
        sampler,
        seeded,
        config.total_steps,
        runs.seed_runs(
            lambda k: {
                "model": RunView(stack, k),
                "ppo": seeded.run_state(k),
                "observation_normalizer": normalizer.runs[k],
            },
            handler.action_key,
        ),
        **runs.runner_options(config.total_steps),
    )
    runs.train(
        runner,
        close=(cage, sample_tree),
        policy=lambda objects: PolicyExport(
            objects["model"],
            objects["observation_normalizer"],
            env_id="CartPole-v1",
            observation_space=spaces.observation,
            action_space=spaces.action,
        ),
    )
    observations = _observations(spaces.observation)
    exported = []
    for k, directory in enumerate(runs.directories):
        policy = load_numpy_policy(directory.path)
        assert policy.source == directory.path / "policy.npz"
        assert policy.trained_with["algorithm"] == "PPO"
        assert policy.trained_with["env_steps"] == config.total_steps
        normalized = normalizer.runs[k].normalize(observations.copy())
        expected = _greedy(stack.agent, stack.run_params(k), normalized)
        actions = policy.act(observations)
        np.testing.assert_array_equal(actions, expected)
        exported.append(actions)
        # the spec loads the same policy from the run's newest checkpoint
        assert read_policy_spec(directory.path / SPEC_FILE)["checkpoint_objects"] == {
            "network": "model"
        }
        (directory.path / "policy.npz").rename(tmp_path / f"aside{k}.npz")
        from_checkpoint = load_numpy_policy(directory.path)
        assert from_checkpoint.source is not None
        assert from_checkpoint.source.parent.name == "checkpoints"
        np.testing.assert_array_equal(from_checkpoint.act(observations), actions)
        (tmp_path / f"aside{k}.npz").rename(directory.path / "policy.npz")
    assert not np.array_equal(exported[0], exported[1])
    # python -m parllel.enjoy plays a seed run's directory
    (episode,) = enjoy(
        [str(runs.directories[1].path), "--episodes", "1", "--max-steps", "5"]
    )
    assert episode.length == 5


def test_a_seeded_sac_run_exports_its_actor(tmp_path: Path) -> None:
    """``SeededSAC.run_agent(k)`` exports run k's actor (no training needed:
    each run starts from its own seed's parameters)."""
    env = gym.make("Pendulum-v1")
    observation_space, action_space = env.observation_space, env.action_space
    assert isinstance(observation_space, gym.spaces.Box)
    assert isinstance(action_space, gym.spaces.Box)
    run_seeds = [Seeds.from_master(m, n_envs=1) for m in (3, 11)]
    agents = [
        build_sac_agent(
            observation_space, action_space, seed=s.torch, hidden_sizes=(16,)
        )
        for s in run_seeds
    ]
    stack = SeedStack(agents)
    seeded = SeededSAC(
        [
            SAC(
                agent, build_sac_optimizers(1e-3), EntropyCoefficient(1.0), seed=s.torch
            )
            for agent, s in zip(agents, run_seeds)
        ],
        stack,
        seeds=[s.master for s in run_seeds],
    )
    observations = _observations(observation_space, 64)
    exported = []
    for k in range(2):
        view = seeded.run_agent(k)
        run_dir = tmp_path / f"run{k}"
        run_dir.mkdir()
        export_policy(
            run_dir,
            view,
            env_id="Pendulum-v1",
            observation_space=observation_space,
            action_space=action_space,
        )
        write_policy_spec(
            run_dir,
            view,
            checkpoint_objects={"agent": view},
            observation_space=observation_space,
            action_space=action_space,
        )
        assert read_policy_spec(run_dir / SPEC_FILE)["checkpoint_objects"] == {
            "network": "agent"
        }
        actions = load_numpy_policy(run_dir).act(observations)
        actor = jax.device_get(seeded.state.actor)
        params = SacPolicyParams(jax.tree.map(lambda x, k=k: x[k], actor), False)
        expected = _greedy(agents[0], params, observations)
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
        exported.append(actions)
    assert not np.allclose(exported[0], exported[1])
