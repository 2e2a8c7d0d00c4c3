"""Train PPO on CartPole-v1 with the envs sampled by Ray actors.

    python examples/cartpole/train_ppo_ray.py                    # a local Ray, 2 actors
    python examples/cartpole/train_ppo_ray.py --quick            # a tiny smoke run
    python examples/cartpole/train_ppo_ray.py --address auto --actors 8   # a running cluster
    python examples/cartpole/train_ppo_ray.py --max-lag 1        # actors sample while PPO trains
    python examples/cartpole/train_ppo_ray.py --help             # every Config field is a flag

Each actor runs a complete parllel sampler (its envs, a CPU copy of the
policy, GAE) and returns one whole ``[T, B]`` batch per request; the learner
(this process) joins the actors' batches into one tree, trains PPO on it and
sends the new weights to every actor with one ``ray.put``. Needs the ``ray``
extra (``pip install -e ".[torch,examples,ray]"``). Writes a run directory
under ``runs/`` like ``train_ppo.py``; the log has the lag and the actors'
fault counters (``async/restarts``, ``async/dropped_batches``,
``async/timeouts``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import torch

from parllel.builders import (
    add_advantage_estimation,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import CageOptions, EnvSpaces, build_cage
from parllel.distributed import RaySampler
from parllel.runners import OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds, actions_seed
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, adam
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    actors: int = 2
    """Ray actors, each sampling envs_per_actor envs"""
    envs_per_actor: int = 4
    """environments stepped side by side in each actor"""
    address: str | None = None
    """Ray cluster to join ("auto": the one `ray start` began); none: a local Ray"""
    num_cpus_per_actor: float = 1.0
    """Ray CPUs each actor reserves"""
    max_lag: int = 0
    """policy versions a batch may be behind the learner (0: actors and learner take turns)"""
    max_restarts: int = 3
    """times Ray restarts an actor that dies (its batch is dropped and counted)"""
    timeout_seconds: float = 60.0
    """report an actor whose batch takes longer than this"""
    batch_T: int = 32
    """env steps per env per batch (2 actors x 4 envs x 32 = 256 samples per update)"""
    total_steps: int = 102_400
    """env steps to train for"""
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
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor-critic MLP"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=5_000, checkpoint_interval_steps=25_000
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(total_steps=512, eval_interval_steps=256, eval_episodes=2, epochs=2)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def build_agent(config: Config, spaces: Any) -> ActorCriticAgent:
    """The actor-critic MLP for ``spaces`` (an ``observation`` and ``action`` space)."""
    model, distribution = build_actor_critic(
        spaces.observation, spaces.action, hidden_sizes=config.hidden_sizes
    )
    return ActorCriticAgent(model, distribution)


def build_actor_sampler(
    actor_index: int, config: Config, seeds: Seeds
) -> FeedForwardSampler:
    """Runs in Ray actor ``actor_index``: its envs (the learner tree's columns
    ``actor_index * envs_per_actor ...``, seeded as those columns), a CPU copy
    of the agent (the learner's weights arrive with every request), GAE."""
    torch.set_num_threads(1)
    n = config.envs_per_actor
    first = actor_index * n
    cage = build_cage(
        make_env,
        n,
        parallel="serial",
        options=CageOptions(seed=list(seeds.envs[first : first + n])),
    )
    handler = TorchHandler(
        build_agent(config, cage.spaces),
        n_envs=n,
        seed=actions_seed(seeds.master, actor_index),  # each actor its own stream
    )
    sample_tree = build_sample_tree(cage, handler, config.batch_T)
    transform = Compose(
        add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda)
    )
    return FeedForwardSampler(cage, handler, sample_tree, transform=transform)


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    n_envs = config.actors * config.envs_per_actor
    seeds = Seeds.from_master(config.seed, n_envs=n_envs, n_eval_envs=4)
    run = config.run.start("cartpole-ppo-ray", config, seeds, resume)

    # the learner's agent; the actors build their own copies and follow it
    env = make_env()
    agent = build_agent(config, EnvSpaces(env.observation_space, env.action_space))
    env.close()
    sampler = RaySampler(
        build_actor_sampler,
        config,
        seeds,
        n_actors=config.actors,
        max_lag=config.max_lag,
        modules={"model": agent.model},
        address=config.address,
        num_cpus_per_actor=config.num_cpus_per_actor,
        max_restarts=config.max_restarts,
        timeout_seconds=config.timeout_seconds,
    )
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        TorchHandler(agent, n_envs=4),
        4,
        config.run.eval_episodes,
        seed=seeds.eval_envs,
    )

    ppo = PPO(
        ActorCriticEvaluator(agent.model, agent.distribution),
        adam(agent.model.parameters(), config.learning_rate),
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=linear_schedule(config.clip_range, 0.0),
        epochs=config.epochs,
        minibatches=1,
    )

    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={"model": agent.model, "ppo": ppo},
        config_keys=["actors", "envs_per_actor", "batch_T", "hidden_sizes"],
        publisher=sampler,  # one ray.put of the weights per update
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(sampler, eval_cage),
        policy=PolicyExport(agent, env_id="CartPole-v1"),  # writes policy.pt
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
