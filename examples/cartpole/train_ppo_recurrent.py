"""Train recurrent PPO on CartPole-v1 with the velocities hidden (needs memory).

The observation keeps only the cart position and the pole angle, so the
policy must infer both velocities from what it saw before: a feed-forward
policy cannot solve this task, an LSTM actor-critic does.

    python examples/cartpole/train_ppo_recurrent.py           # solves it (see docs)
    python examples/cartpole/train_ppo_recurrent.py --quick   # a tiny smoke run
    python examples/cartpole/train_ppo_recurrent.py --process # envs in workers
    python examples/cartpole/train_ppo_recurrent.py --resume runs/cartpole-ppo-lstm-...

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``.
"""

from __future__ import annotations

import argparse
import dataclasses

import gymnasium as gym
import numpy as np
import torch

from parllel.patterns import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_cages,
    build_eval_sampler,
    build_run_logger,
    build_sample_tree,
    run_training,
)
from parllel.runners import OnPolicyRunner, RunDirectory, Seeds, seed_everything
from parllel.samplers import RecurrentSampler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, linear_schedule
from parllel.torch.handler import TorchHandler
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose


@dataclasses.dataclass
class Config:
    seed: int = 0
    n_envs: int = 8
    batch_T: int = 32  # sequence length: 256 samples per update
    total_steps: int = 100_000
    gamma: float = 0.98
    gae_lambda: float = 0.8
    learning_rate: float = 1e-3  # decays linearly to 0
    clip_range: float = 0.2  # decays linearly to 0
    epochs: int = 10
    minibatches: int = 1  # recurrent minibatches are whole env columns
    entropy_coef: float = 0.0
    recurrent_cell: str = "lstm"
    recurrent_size: int = 128
    hidden_sizes: tuple[int, ...] = (64,)
    eval_interval_steps: int = 10_000
    eval_episodes: int = 10
    parallel: str = "serial"  # "process", "serial" or "auto"
    run_root: str = "runs"


class HideVelocities(gym.ObservationWrapper):
    """Keep cart position and pole angle; drop both velocities."""

    KEEP = np.array([0, 2])

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(
            space.low[self.KEEP], space.high[self.KEEP], dtype=space.dtype
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.KEEP]  # [2]: x, theta


def make_env() -> gym.Env:
    return HideVelocities(gym.make("CartPole-v1"))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=5)
    seed_everything(seeds)
    run = (
        RunDirectory.open(resume)
        if resume
        else RunDirectory.create(
            config.run_root, "cartpole-ppo-lstm", config=config, seeds=seeds
        )
    )

    # environments and a recurrent agent (per-env LSTM state lives in the handler)
    cage = build_cages(
        make_env, config.n_envs, parallel=config.parallel, seed=seeds.envs
    )
    model, distribution = build_actor_critic(
        cage.spaces.observation,
        cage.spaces.action,
        hidden_sizes=config.hidden_sizes,
        recurrent_cell=config.recurrent_cell,
        recurrent_size=config.recurrent_size,
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=cage.n_envs)

    # the batch buffer [T, B] with INITIAL_STATE [B, ...]; observations are
    # normalized as they arrive; after each batch, reward scaling then GAE.
    # (Without reward scaling the shared LSTM saturates chasing value targets
    # of ~50 and learning stalls; with it, targets are O(1).)
    sample_tree = build_sample_tree(cage, handler, config.batch_T, recurrent=True)
    observation_normalizer = add_obs_normalization(sample_tree)
    transform = Compose(
        add_reward_normalization(sample_tree, config.gamma)
        + add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda)
    )
    sampler = RecurrentSampler(
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
        config.eval_episodes,
        seed=seeds.eval_envs,
        observation_normalizer=observation_normalizer,  # frozen while evaluating
    )

    # recurrent PPO: minibatches of whole sequences, state reset where episodes start
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=linear_schedule(config.clip_range, 0.0),
        epochs=config.epochs,
        minibatches=config.minibatches,
        entropy_coef=config.entropy_coef,
        recurrent=True,
        batch_shape=(config.batch_T, config.n_envs),
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
        checkpoint_interval_steps=50_000,
        checkpoint_objects={
            "model": model,
            "ppo": ppo,
            "transform": transform,  # reward statistics
            "observation_normalizer": observation_normalizer,
        },
        config=dataclasses.asdict(config),
        config_keys=["n_envs", "batch_T", "recurrent_cell", "recurrent_size"],
    )
    return run_training(
        runner,
        run,
        resume=bool(resume),
        close=(
            cage,
            eval_cage,
            sample_tree,
        ),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run for smoke tests")
    parser.add_argument(
        "--process", action="store_true", help="step envs in worker processes"
    )
    parser.add_argument("--resume", help="run directory to resume from")
    parser.add_argument("--steps", type=int, help="override total_steps")
    parser.add_argument("--seed", type=int, help="override the master seed")
    args = parser.parse_args()
    config = Config()
    if args.quick:
        config = dataclasses.replace(
            config, total_steps=512, eval_interval_steps=256, eval_episodes=2, epochs=2
        )
    if args.process:
        config = dataclasses.replace(config, parallel="process")
    if args.steps:
        config = dataclasses.replace(config, total_steps=args.steps)
    if args.seed is not None:
        config = dataclasses.replace(config, seed=args.seed)
    main(config, args.resume)
