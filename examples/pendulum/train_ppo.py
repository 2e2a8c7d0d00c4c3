"""Train PPO on Pendulum-v1: continuous actions, normalized observations and rewards.

    python examples/pendulum/train_ppo.py            # learns to swing up (see docs)
    python examples/pendulum/train_ppo.py --quick    # a tiny smoke run
    python examples/pendulum/train_ppo.py --parallel process  # envs in worker processes
    python examples/pendulum/train_ppo.py --resume runs/pendulum-ppo-...
    python examples/pendulum/train_ppo.py --help     # every Config field is a flag

Observations are normalized by running statistics as they arrive (the agent
acts on normalized observations; evaluation uses the frozen statistics);
rewards are scaled by the running std of the discounted return before GAE.
Both statistics are saved in checkpoints. Pendulum episodes are truncated at
200 steps, never terminated: GAE bootstraps them from the value of the final
observation. Writes a run directory under ``runs/``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import gymnasium as gym
import torch

from parllel.builders import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import CageOptions, build_cage
from parllel.runners import OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, adam
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 256
    """env steps per env per batch (2048 samples per update)"""
    total_steps: int = 307_200
    """env steps to train for (150 batches; rounded up to whole batches)"""
    gamma: float = 0.9
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 1e-3
    """initial Adam learning rate (decays linearly to 0)"""
    clip_range: float = 0.2
    """PPO clip range"""
    epochs: int = 10
    """passes over each batch"""
    minibatches: int = 8
    """minibatches per epoch (256 samples each)"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    init_log_std: float = -0.5
    """initial log standard deviation of the Gaussian policy"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the policy and value networks"""
    parallel: Literal["process", "serial", "auto"] = "serial"
    """where envs step: worker processes, this process, or measured"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=20_000, checkpoint_interval_steps=100_000
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    batch_T=32,
    minibatches=4,
    total_steps=512,
    eval_interval_steps=256,
    eval_episodes=5,
    epochs=2,
)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("Pendulum-v1")


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=5)
    run = config.run.start("pendulum-ppo", config, seeds, resume)

    # environments and a Gaussian actor-critic (state-independent log-std)
    cage = build_cage(
        make_env,
        config.n_envs,
        parallel=config.parallel,
        options=CageOptions(seed=seeds.envs),
    )
    model, distribution = build_actor_critic(
        cage.spaces.observation,
        cage.spaces.action,
        hidden_sizes=config.hidden_sizes,
        shared_trunk=False,
        init_log_std=config.init_log_std,
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=cage.n_envs, seed=seeds.actions)

    # the batch buffer [T, B]; observations normalized as they arrive; after
    # each batch: reward scaling, then GAE on the scaled rewards
    sample_tree = build_sample_tree(cage, handler, config.batch_T)
    observation_normalizer = add_obs_normalization(sample_tree)
    transform = Compose(
        add_reward_normalization(sample_tree, config.gamma)
        + add_advantage_estimation(
            sample_tree, config.gamma, config.gae_lambda, normalize=True
        )
    )
    sampler = FeedForwardSampler(
        cage,
        handler,
        sample_tree,
        transform=transform,
        observation_normalizer=observation_normalizer,
    )
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        TorchHandler(agent, n_envs=5),
        5,
        config.run.eval_episodes,
        seed=seeds.eval_envs,
        observation_normalizer=observation_normalizer,  # frozen while evaluating
    )

    # the algorithm
    optimizer = adam(model.parameters(), config.learning_rate)  # fused: measured faster
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=config.clip_range,
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        batch_shape=(config.batch_T, config.n_envs),
        # advantages normalized over the whole batch by add_advantage_estimation
        # above (the results in docs/training.md), not again per minibatch
        normalize_advantage=False,
    )

    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={
            "model": model,
            "ppo": ppo,
            "transform": transform,  # reward statistics
            "observation_normalizer": observation_normalizer,
        },
        config_keys=["n_envs", "batch_T", "hidden_sizes"],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, eval_cage, sample_tree),
        policy=PolicyExport(agent, observation_normalizer, env_id="Pendulum-v1"),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
