"""Train recurrent PPO on CartPole-v1 with the velocities hidden (needs memory).

The observation keeps only the cart position and the pole angle, so the
policy must infer both velocities from what it saw before: a feed-forward
policy cannot solve this task, an LSTM actor-critic does.

    python examples/cartpole/train_ppo_recurrent.py           # solves it (see docs)
    python examples/cartpole/train_ppo_recurrent.py --quick   # a tiny smoke run
    python examples/cartpole/train_ppo_recurrent.py --parallel process  # envs in workers
    python examples/cartpole/train_ppo_recurrent.py --resume runs/cartpole-ppo-lstm-...
    python examples/cartpole/train_ppo_recurrent.py --help    # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import gymnasium as gym
import numpy as np
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
from parllel.samplers import RecurrentSampler
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
    batch_T: int = 32
    """sequence length: env steps per env per batch (256 samples per update)"""
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
    epochs: int = 10
    """passes over each batch"""
    minibatches: int = 1
    """minibatches per epoch (recurrent minibatches are whole env columns)"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus"""
    recurrent_cell: Literal["lstm", "gru"] = "lstm"
    """recurrent core of the actor-critic"""
    recurrent_size: int = 128
    """units of the recurrent core"""
    hidden_sizes: tuple[int, ...] = (64,)
    """widths of the layers after the recurrent core"""
    parallel: Literal["process", "serial", "auto"] = "serial"
    """where envs step: worker processes, this process, or measured"""
    run: RunSettings = RunSettings.field()
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(total_steps=512, eval_interval_steps=256, eval_episodes=2, epochs=2)
"""the --quick preset: a tiny smoke run"""


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


def make_env(render_mode: str | None = None) -> gym.Env:
    return HideVelocities(gym.make("CartPole-v1", render_mode=render_mode))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(config.seed, n_envs=config.n_envs, n_eval_envs=5)
    run = config.run.start("cartpole-ppo-lstm", config, seeds, resume)

    # environments and a recurrent agent (per-env LSTM state lives in the handler)
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
        recurrent_cell=config.recurrent_cell,
        recurrent_size=config.recurrent_size,
    )
    agent = ActorCriticAgent(model, distribution)
    handler = TorchHandler(agent, n_envs=cage.n_envs, seed=seeds.actions)

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
        config.run.eval_episodes,
        seed=seeds.eval_envs,
        observation_normalizer=observation_normalizer,  # frozen while evaluating
    )

    # recurrent PPO: minibatches of whole sequences, state reset where episodes start
    optimizer = adam(model.parameters(), config.learning_rate)  # fused: measured faster
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
        # the results in docs/training.md were measured without (rewards are
        # normalized instead)
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
        config_keys=["n_envs", "batch_T", "recurrent_cell", "recurrent_size"],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, eval_cage, sample_tree),
        # writes policy.pt; the env is this file's make_env (no gymnasium id)
        policy=PolicyExport(
            agent,
            observation_normalizer,
            env_factory=f"{Path(__file__).resolve()}:make_env",
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
