"""Train double DQN on CartPole-v1 (target network, epsilon-greedy schedule).

    python examples/cartpole/train_dqn.py                 # eval return >= 475
    python examples/cartpole/train_dqn.py --n-step 3      # n-step returns
    python examples/cartpole/train_dqn.py --prioritized   # prioritized replay
    python examples/cartpole/train_dqn.py --quick         # a tiny smoke run
    python examples/cartpole/train_dqn.py --backend jax   # the JAX DQN (the jax extra)
    python examples/cartpole/train_dqn.py --resume runs/cartpole-dqn-...
    python examples/cartpole/train_dqn.py --help          # every Config field is a flag

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Stops early once the mean
eval return reaches ``target_return``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch

from parllel.builders import build_eval_sampler, build_replay_tree
from parllel.cages import CageOptions, ProcessCage, build_cage
from parllel.replays import PrioritizedReplay, UniformReplay
from parllel.runners import Callback, OffPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import FeedForwardSampler
from parllel.schedules import epsilon_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import build_dqn_agent
from parllel.torch.algos import DQN, adam


@dataclasses.dataclass
class Config:
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 4
    """environments stepped side by side"""
    batch_T: int = 64
    """env steps per env per batch (4 x 64 = 256 env steps per batch)"""
    total_steps: int = 61_440
    """env steps to train for (240 batches; rounded up to whole batches)"""
    replay_size: int = 100_000
    """replay capacity in env steps"""
    batch_size: int = 64
    """transitions per gradient update"""
    learning_starts: int = 1_000
    """env steps stored before the first update"""
    replay_ratio: float = 0.5
    """gradient updates per env step (128 per batch of 256 steps)"""
    learning_rate: float = 2.3e-3
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor"""
    n_step: int = 1
    """n-step returns"""
    prioritized: bool = False
    """prioritized replay instead of uniform"""
    target_update_interval: int = 128
    """gradient updates between target-network copies (once a batch)"""
    epsilon_start: float = 1.0
    """exploration epsilon at the start"""
    epsilon_end: float = 0.04
    """exploration epsilon after the decay"""
    epsilon_decay_steps: int = 8_000
    """env steps of the linear epsilon decay"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the Q network"""
    target_return: float | None = 475.0
    """stop once the mean eval return reaches this (None: never)"""
    checkpoint_replay_contents: bool = False
    """save every stored transition in checkpoints"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax Q-network, K updates per compiled call)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=2_048, checkpoint_interval_steps=20_000
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    total_steps=1_024,
    batch_T=32,
    learning_starts=128,
    hidden_sizes=(32, 32),
    eval_interval_steps=512,
    eval_episodes=2,
)
"""the --quick preset: a tiny smoke run"""


def make_env() -> gym.Env:
    return gym.make("CartPole-v1")


def build_agent(config: Config, spaces: Any, seeds: Seeds) -> Any:
    """The Q-network MLP for ``spaces`` (an ``observation`` and ``action`` space)."""
    if config.backend == "jax":
        from parllel.jax.agents import build_dqn_agent as build_jax_dqn_agent

        return build_jax_dqn_agent(
            spaces.observation,
            spaces.action,
            seed=seeds.torch,  # the learner's stream initializes the weights
            hidden_sizes=config.hidden_sizes,
        )
    return build_dqn_agent(
        spaces.observation, spaces.action, hidden_sizes=config.hidden_sizes
    )


def build_handler(config: Config, agent: Any, n_envs: int, seed: int | None) -> Any:
    """The handler that runs ``agent`` on the sample tree (torch or JAX)."""
    if config.backend == "jax":
        from parllel.jax import JaxHandler

        return JaxHandler(agent, n_envs=n_envs, seed=seed)
    return TorchHandler(agent, n_envs=n_envs, seed=seed)


def policy_export(config: Config) -> Any:
    """What exports the run's policy: policy.pt (torch) or policy.npz (JAX)."""
    if config.backend == "jax":
        from parllel.jax.export import PolicyExport as JaxPolicyExport

        return JaxPolicyExport
    return PolicyExport


def build_dqn(config: Config, agent: Any) -> Any:
    """Double DQN with hard target updates and Adam (torch's or its JAX twin)."""
    options = dict(
        target_update_interval=config.target_update_interval,
        replay_ratio=config.replay_ratio,
    )
    if config.backend == "jax":
        from parllel.jax.algos import DQN as JaxDQN
        from parllel.jax.algos import adam as jax_adam

        # every update of a batch in one compiled call
        return JaxDQN(agent, jax_adam(config.learning_rate), **options)
    optimizer = adam(agent.q_network.parameters(), learning_rate=config.learning_rate)
    return DQN(agent, optimizer, **options)


class StopAtReturn(Callback):
    """Ends training after the first evaluation whose mean return reaches a target."""

    def __init__(self, target: float | None) -> None:
        self.target = target

    def on_eval_end(self, runner, eval_metrics) -> None:
        mean = eval_metrics["eval/return_mean"]
        if self.target is not None and mean >= self.target:
            print(
                f"eval return {mean:.1f} reached --target-return {self.target:g}: "
                "training stops here (--target-return None trains to --total-steps)"
            )
            runner.request_stop()


def main(config: Config, resume: str | None = None) -> dict:
    if config.backend == "jax":  # before JAX's first computation (docs/jax.md)
        from parllel.jax.training_setup import prepare_jax_for_training

        prepare_jax_for_training()
    torch.set_num_threads(1)
    seeds = Seeds.from_master(
        config.seed, n_envs=config.n_envs, n_eval_envs=config.run.eval_episodes
    )
    run = config.run.start("cartpole-dqn", config, seeds, resume)

    # environments (stepped in this process: CartPole is cheaper than a pipe)
    cage = build_cage(
        make_env, config.n_envs, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    agent = build_agent(config, cage.spaces, seeds)
    handler = build_handler(config, agent, cage.n_envs, seeds.actions)

    # the [T, B] batch and the full-size replay each batch is copied into
    # the full-size replay tree: the sampler's [T, B] window slides over it,
    # so every step is written once, straight into the replay (no copy)
    replay_tree = build_replay_tree(
        cage,
        handler,
        config.batch_T,
        config.replay_size,
        storage="shared" if isinstance(cage, ProcessCage) else "local",
    )
    replay_kwargs = dict(
        learning_starts=config.learning_starts,
        n_step=config.n_step,
        discount=config.gamma,
    )
    rng = np.random.default_rng(seeds.replay)
    callbacks: list[Callback] = [
        AttributeSchedule(
            agent,
            "epsilon",
            epsilon_schedule(
                config.epsilon_start, config.epsilon_end, config.epsilon_decay_steps
            ),
        ),
        StopAtReturn(config.target_return),
    ]
    if config.prioritized:
        replay = PrioritizedReplay(
            replay_tree, config.batch_size, rng, alpha=0.6, beta=0.4, **replay_kwargs
        )
        # anneal the importance-weight exponent to 1 over the run
        callbacks.append(
            AttributeSchedule(
                replay,
                "beta",
                lambda step: min(1.0, 0.4 + 0.6 * step / config.total_steps),
            )
        )
    else:
        replay = UniformReplay(replay_tree, config.batch_size, rng, **replay_kwargs)
    sampler = FeedForwardSampler(cage, handler, replay_tree)
    eval_sampler, eval_cage = build_eval_sampler(
        make_env,
        build_handler(config, agent, config.run.eval_episodes, seed=None),
        config.run.eval_episodes,
        config.run.eval_episodes,
        seed=seeds.eval_envs,
    )

    # the algorithm: double DQN, hard target updates
    dqn = build_dqn(config, agent)
    jax = config.backend == "jax"

    runner = OffPolicyRunner(
        sampler,
        replay,
        dqn,
        config.total_steps,
        checkpoint_objects=(
            {"agent": agent, "dqn": dqn}  # a JAX agent's parameters, numpy leaves
            if jax
            else {"q_network": agent.q_network, "dqn": dqn}
        ),
        checkpoint_replay_contents=config.checkpoint_replay_contents,
        config_keys=["n_envs", "batch_T", "replay_size", "hidden_sizes"]
        + (["backend"] if jax else []),
        callbacks=callbacks,
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, eval_cage, replay_tree),
        # writes policy.pt (torch) or policy.npz (JAX, plays in numpy)
        policy=policy_export(config)(
            agent,
            env_id="CartPole-v1",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
