"""Train SAC on Pendulum-v1: one env, one gradient update per env step.

    python examples/pendulum/train_sac.py            # eval return >= -200 in ~5k steps
    python examples/pendulum/train_sac.py --quick    # a tiny smoke run
    python examples/pendulum/train_sac.py --resume runs/pendulum-sac-...
    python examples/pendulum/train_sac.py --help     # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Stops early once the mean
eval return reaches ``target_return``.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from parllel.cages import ProcessCage
from parllel.patterns import (
    build_cages,
    build_eval_sampler,
    build_replay_tree,
    build_run_logger,
    run_training,
)
from parllel.replays import UniformReplay
from parllel.runners import Callback, OffPolicyRunner
from parllel.runners.off_policy import AttributeSchedule
from parllel.runtime import RunDirectory, Seeds, seed_everything
from parllel.runtime.cli import parse_config
from parllel.samplers import FeedForwardSampler
from parllel.torch.agents import build_sac_agent
from parllel.torch.algos import SAC, EntropyCoefficient, build_sac_optimizer
from parllel.torch.handler import TorchHandler


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and the env)"""
    batch_T: int = 1
    """env steps per batch (one env): update after every step"""
    total_steps: int = 20_000
    """env steps to train for"""
    replay_size: int = 1_000_000
    """replay capacity in env steps"""
    batch_size: int = 256
    """transitions per gradient update"""
    learning_starts: int = 256
    """uniform random actions until this many env steps are stored"""
    replay_ratio: float = 1.0
    """gradient updates per env step"""
    learning_rate: float = 1e-3
    """Adam learning rate (actor, critics, temperature)"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """target-critic averaging rate"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of actor and critics"""
    eval_interval_steps: int = 1_000
    """env steps between evaluations (and log lines)"""
    eval_episodes: int = 10
    """deterministic episodes per evaluation"""
    target_return: float | None = -200.0
    """stop once the mean eval return reaches this (None: never)"""
    checkpoint_interval_steps: int = 5_000
    """env steps between checkpoints (one is also written at the end)"""
    checkpoint_replay_contents: bool = False
    """save every stored transition in checkpoints"""
    run_root: str = "runs"
    """directory the run directory is created in"""


QUICK = dict(
    total_steps=400,
    learning_starts=64,
    batch_size=64,
    hidden_sizes=(32, 32),
    eval_interval_steps=200,
    eval_episodes=2,
)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("Pendulum-v1")


class StopAtReturn(Callback):
    """Ends training after the first evaluation whose mean return reaches a target."""

    def __init__(self, target: float | None) -> None:
        self.target = target

    def on_eval_end(self, runner, eval_metrics) -> None:
        if self.target is not None and eval_metrics["eval/return_mean"] >= self.target:
            runner.request_stop()


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=1, n_eval_envs=config.eval_episodes)
    seed_everything(seeds)
    run = (
        RunDirectory.open(resume)
        if resume
        else RunDirectory.create(
            config.run_root, "pendulum-sac", config=config, seeds=seeds
        )
    )

    # one env in this process, the agent (squashed Gaussian actor, twin Q)
    cage = build_cages(make_env, 1, parallel="serial", seed=seeds.envs)
    agent = build_sac_agent(
        cage.spaces.observation, cage.spaces.action, hidden_sizes=config.hidden_sizes
    )
    handler = TorchHandler(agent, n_envs=1)

    # the full-size replay tree: the sampler's [T, B] window slides over it,
    # so every step is written once, straight into the replay (no copy)
    replay_tree = build_replay_tree(
        cage,
        handler,
        config.batch_T,
        config.replay_size,
        storage="shared" if isinstance(cage, ProcessCage) else "local",
    )
    replay = UniformReplay(
        replay_tree,
        config.batch_size,
        np.random.default_rng(seeds.replay),
        learning_starts=config.learning_starts,
        discount=config.gamma,
    )
    sampler = FeedForwardSampler(cage, handler, replay_tree)
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        TorchHandler(agent, n_envs=config.eval_episodes),
        config.eval_episodes,
        config.eval_episodes,
        seed=seeds.eval_envs,
    )

    # the algorithm: one update per env step; alpha is learned, starting at 1;
    # one fused Adam steps actor, critic and alpha together
    alpha = EntropyCoefficient(1.0)
    optimizer = build_sac_optimizer(agent, alpha, learning_rate=config.learning_rate)
    sac = SAC(agent, optimizer, alpha, tau=config.tau, replay_ratio=config.replay_ratio)

    logger = build_run_logger(run, config.total_steps, resume=bool(resume))
    runner = OffPolicyRunner(
        sampler,
        replay,
        sac,
        config.total_steps,
        eval_sampler=eval_sampler,
        eval_interval_steps=config.eval_interval_steps,
        logger=logger,
        log_interval_steps=config.eval_interval_steps,
        checkpoint_dir=run.checkpoints_dir,
        checkpoint_interval_steps=config.checkpoint_interval_steps,
        checkpoint_objects={"actor": agent.actor, "critic": agent.critic, "sac": sac},
        checkpoint_replay_contents=config.checkpoint_replay_contents,
        config=dataclasses.asdict(config),
        config_keys=["batch_T", "replay_size", "hidden_sizes"],
        callbacks=[
            # warm-up: uniform random actions until learning starts
            AttributeSchedule(
                agent, "random_actions", lambda step: step < config.learning_starts
            ),
            StopAtReturn(config.target_return),
        ],
    )
    return run_training(
        runner,
        run,
        resume=bool(resume),
        close=(
            cage,
            eval_cage,
            replay_tree,
        ),
    )


if __name__ == "__main__":
    main(*parse_config(Config, quick=QUICK, description=__doc__))
