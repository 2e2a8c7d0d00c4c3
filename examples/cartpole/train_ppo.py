"""Train PPO on CartPole-v1 with envs stepped in worker processes.

    python examples/cartpole/train_ppo.py                     # solves CartPole in ~1 min
    python examples/cartpole/train_ppo.py --quick             # a tiny smoke run
    python examples/cartpole/train_ppo.py --parallel serial   # same batches, no processes
    python examples/cartpole/train_ppo.py --sampler alternating  # inference overlaps stepping
    python examples/cartpole/train_ppo.py --rebalance         # envs follow the faster core
    python examples/cartpole/train_ppo.py --resume runs/cartpole-ppo-...
    python examples/cartpole/train_ppo.py --help              # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Ctrl-C stops at the end of
the current batch, writes a checkpoint and prints the command that resumes.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import gymnasium as gym
import torch

from parllel.patterns import (
    add_advantage_estimation,
    build_alternating_cages,
    build_cages,
    build_eval_sampler,
    build_run_logger,
    build_sample_tree,
    run_training,
)
from parllel.runners import OnPolicyRunner
from parllel.runtime import RunDirectory, Seeds, seed_everything
from parllel.runtime.cli import parse_config
from parllel.samplers import AlternatingSampler, FeedForwardSampler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, adam, linear_schedule
from parllel.torch.handler import TorchHandler
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 32
    """env steps per env per batch (8 x 32 = 256 samples per update)"""
    total_steps: int = 102_400
    """env steps to train for (400 batches; rounded up to whole batches)"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.8
    """GAE lambda"""
    learning_rate: float = 1e-3
    """initial Adam learning rate (decays linearly to 0)"""
    clip_range: float = 0.2
    """initial PPO clip range (decays linearly to 0)"""
    epochs: int = 20
    """passes over each batch"""
    minibatches: int = 1
    """minibatches per epoch"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor-critic MLP"""
    eval_interval_steps: int = 5_000
    """env steps between evaluations (and log lines)"""
    eval_episodes: int = 10
    """deterministic episodes per evaluation"""
    checkpoint_interval_steps: int = 25_000
    """env steps between checkpoints (one is also written at the end)"""
    parallel: Literal["process", "serial", "auto"] = "process"
    """where envs step: worker processes, this process, or measured"""
    sampler: Literal["feedforward", "alternating"] = "feedforward"
    """alternating: two halves of the envs, one worker each, inference overlaps stepping"""
    rebalance: bool = False
    """feed-forward process cages: move envs towards the faster process"""
    run_root: str = "runs"
    """directory the run directory is created in"""


QUICK = dict(total_steps=512, eval_interval_steps=256, eval_episodes=2, epochs=2)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=4)
    seed_everything(seeds)
    run = (
        RunDirectory.open(resume)
        if resume
        else RunDirectory.create(
            config.run_root, "cartpole-ppo", config=config, seeds=seeds
        )
    )

    # environments (in worker processes) and the agent
    if config.sampler == "alternating":
        cages = build_alternating_cages(make_env, config.n_envs, seed=seeds.envs)
    else:
        process = {"rebalance": True} if config.rebalance else {}
        cages = [
            build_cages(
                make_env,
                config.n_envs,
                parallel=config.parallel,
                seed=seeds.envs,
                **process,
            )
        ]
    spaces = cages[0].spaces
    model, distribution = build_actor_critic(
        spaces.observation, spaces.action, hidden_sizes=config.hidden_sizes
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=config.n_envs)

    # the batch buffer [T, B] and what runs on it after each batch
    sample_tree = build_sample_tree(cages, handler, config.batch_T)
    transform = Compose(
        add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda)
    )
    sampler_type = (
        AlternatingSampler if config.sampler == "alternating" else FeedForwardSampler
    )
    sampler = sampler_type(cages, handler, sample_tree, transform=transform)
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        TorchHandler(agent, n_envs=4),
        4,
        config.eval_episodes,
        seed=seeds.eval_envs,
    )

    # the algorithm
    optimizer = adam(model.parameters(), config.learning_rate)  # fused: measured faster
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=linear_schedule(config.clip_range, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
    )

    logger = build_run_logger(run, config.total_steps, resume=bool(resume))
    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        eval_sampler=eval_sampler,
        eval_interval_steps=config.eval_interval_steps,
        logger=logger,
        log_interval_steps=config.eval_interval_steps,
        checkpoint_dir=run.checkpoints_dir,
        checkpoint_interval_steps=config.checkpoint_interval_steps,
        checkpoint_objects={"model": model, "ppo": ppo, "transform": transform},
        config=dataclasses.asdict(config),
        config_keys=["n_envs", "batch_T", "hidden_sizes"],
    )
    return run_training(
        runner,
        run,
        resume=bool(resume),
        close=(*cages, eval_cage, sample_tree),
    )


if __name__ == "__main__":
    main(*parse_config(Config, quick=QUICK, description=__doc__))
