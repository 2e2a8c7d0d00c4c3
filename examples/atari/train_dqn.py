"""Train DQN on an Atari game with CleanRL's dqn_atari settings.

    python examples/atari/train_dqn.py                          # Pong, 10M steps
    python examples/atari/train_dqn.py --env-id ALE/Breakout-v5 # another ALE v5 game
    python examples/atari/train_dqn.py --quick                  # a tiny smoke run
    python examples/atari/train_dqn.py --backend jax            # the JAX DQN (the jax extra)
    python examples/atari/train_dqn.py --resume runs/atari-dqn-...
    python examples/atari/train_dqn.py --help                   # every Config field is a flag

Needs the ``atari`` extra (ale-py with its bundled ROMs, OpenCV). The envs
are :func:`parllel.envs.atari.make_atari_env`'s standard stack (no-op reset,
frame skip 4 with max-pooling, FIRE reset, 84x84 grayscale, 4 stacked
frames); training envs end an episode at every lost life, with
:class:`~parllel.envs.atari.GameTrajInfo` logging whole games; rewards are
clipped to [-1, 1] in the sample tree; evaluation plays whole games.

The replay stores one 84x84 frame per step (``frame_stack=4``, see
:mod:`parllel.frame_stacks.replay`) and rebuilds the 4-frame stacks when it
samples: the default 1M steps take about 7.3 GB (whole stacks: about 29 GB).
The Q-network is the Nature CNN (three convs, 512 ReLU units, a linear head).

CleanRL's defaults: Adam 1e-4, replay 1M, gamma 0.99, hard target update
every 1,000 env steps, batch 32, epsilon 1 -> 0.01 over the first 10% of
10M steps, learning from 80k steps, one update per 4 env steps, plain (not
double) DQN. Unlike CleanRL the loss is Huber (as in the Nature paper and
SB3) rather than the squared error.

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Ctrl-C stops at the end of
the current batch, writes a checkpoint and prints the command that resumes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np
import torch

from parllel.builders import add_reward_clipping, build_eval_sampler, build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.envs.atari import GameTrajInfo, make_atari_env
from parllel.frame_stacks.replay import build_frame_replay_tree
from parllel.replays import UniformReplay
from parllel.runners import OffPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import FeedForwardSampler
from parllel.schedules import epsilon_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import build_dqn_agent
from parllel.torch.algos import DQN
from parllel.transforms import Compose

N_EVAL_ENVS = 4
FRAME_STACK = 4


@dataclasses.dataclass
class Config:
    env_id: str = "ALE/Pong-v5"
    """ALE v5 game (made with frameskip=1; the preprocessing skips frames)"""
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 4
    """environments stepped side by side"""
    batch_T: int = 8
    """env steps per env per batch (4 x 8 = 32 env steps, 8 updates)"""
    total_steps: int = 10_000_000
    """env steps (agent steps, 4 frames each) to train for"""
    replay_size: int = 1_000_000
    """replay capacity in env steps (one stored frame each, ~7.3 kB)"""
    batch_size: int = 32
    """transitions per gradient update"""
    learning_starts: int = 80_000
    """env steps stored before the first update"""
    train_frequency: int = 4
    """env steps per gradient update"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor"""
    target_update_steps: int = 1_000
    """env steps between hard target-network copies"""
    double_dqn: bool = False
    """choose the bootstrap action with the online network"""
    epsilon_start: float = 1.0
    """exploration epsilon at the start"""
    epsilon_end: float = 0.01
    """exploration epsilon after the decay"""
    exploration_fraction: float = 0.1
    """fraction of total_steps over which epsilon decays linearly"""
    repeat_action_probability: float = 0.0
    """ALE's sticky actions (0.25 in Machado et al.'s protocol)"""
    eval_max_frames: int = 108_000
    """ALE frames after which an evaluation game is cut (ALE's v5 limit)"""
    checkpoint_replay_contents: bool = False
    """save every stored frame in checkpoints (7.3 GB at 1M steps)"""
    parallel: Literal["process", "serial", "auto"] = "process"
    """where envs step: worker processes, this process, or measured"""
    backend: Literal["torch", "jax"] = "torch"
    """learning library: torch, or JAX (flax Nature CNN, K updates per compiled call)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=250_000,
        eval_episodes=4,
        log_interval_steps=50_000,
        checkpoint_interval_steps=500_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    total_steps=512,
    replay_size=1_024,
    learning_starts=128,
    target_update_steps=128,
    eval_interval_steps=256,
    log_interval_steps=256,
    eval_episodes=N_EVAL_ENVS,
    eval_max_frames=200,
    checkpoint_replay_contents=True,
    parallel="serial",
)
"""the --quick preset: a tiny smoke run (eval games cut after 200 frames)"""


def build_agent(config: Config, spaces: Any, seeds: Seeds) -> Any:
    """The Nature-CNN Q-network for ``spaces`` (torch or JAX)."""
    if config.backend == "jax":
        from parllel.jax.agents import build_dqn_agent as build_jax_dqn_agent

        # the learner's stream initializes the weights
        return build_jax_dqn_agent(spaces.observation, spaces.action, seed=seeds.torch)
    return build_dqn_agent(spaces.observation, spaces.action)


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
    """DQN with one update per ``train_frequency`` env steps and hard target
    copies every ``target_update_steps`` env steps (counted in updates)."""
    options = dict(
        double_dqn=config.double_dqn,
        target_update_interval=max(
            1, config.target_update_steps // config.train_frequency
        ),
        max_grad_norm=None,
        replay_ratio=1 / config.train_frequency,
    )
    if config.backend == "jax":
        from parllel.jax.algos import DQN as JaxDQN
        from parllel.jax.algos import adam as jax_adam

        # every update of a batch in one compiled call
        return JaxDQN(agent, jax_adam(config.learning_rate), **options)
    optimizer = torch.optim.Adam(agent.q_network.parameters(), lr=config.learning_rate)
    return DQN(agent, optimizer, **options)


def main(config: Config, resume: str | None = None) -> dict:
    if config.backend == "jax":  # before JAX's first computation (docs/jax.md)
        from parllel.jax.training_setup import prepare_jax_for_training

        prepare_jax_for_training()
    torch.set_num_threads(1)
    seeds = Seeds.from_master(
        config.seed, n_envs=config.n_envs, n_eval_envs=N_EVAL_ENVS
    )
    run = config.run.start("atari-dqn", config, seeds, resume)

    # training envs: a lost life ends the episode; GameTrajInfo logs games
    env_kwargs = dict(
        env_id=config.env_id,
        episodic_life=True,
        frame_stack=FRAME_STACK,
        repeat_action_probability=config.repeat_action_probability,
    )
    cage = build_cage(
        make_atari_env,
        config.n_envs,
        env_kwargs,
        parallel=config.parallel,
        options=CageOptions(seed=seeds.envs, traj_info_type=GameTrajInfo),
    )
    agent = build_agent(config, cage.spaces, seeds)
    handler = build_handler(config, agent, config.n_envs, seeds.actions)

    # the sampler's [T, B] batch of 4-frame stacks; each batch is copied into
    # the replay, which keeps only the newest frame of every step
    sample_tree = build_sample_tree(
        cage, handler, config.batch_T, final_observation=True
    )
    transform = Compose(add_reward_clipping(sample_tree))
    sampler = FeedForwardSampler(cage, handler, sample_tree, transform=transform)
    replay_tree = build_frame_replay_tree(
        sample_tree, -(-config.replay_size // config.n_envs), FRAME_STACK
    )
    replay = UniformReplay(
        replay_tree,
        config.batch_size,
        np.random.default_rng(seeds.replay),
        learning_starts=config.learning_starts,
        discount=config.gamma,
        frame_stack=FRAME_STACK,
    )
    eval_sampler, eval_cage = build_eval_sampler(
        make_atari_env,
        build_handler(config, agent, N_EVAL_ENVS, seed=None),
        N_EVAL_ENVS,
        config.run.eval_episodes,
        dict(
            env_id=config.env_id,
            frame_stack=FRAME_STACK,
            repeat_action_probability=config.repeat_action_probability,
            max_num_frames_per_episode=config.eval_max_frames,
        ),
        seed=seeds.eval_envs,
    )

    # the algorithm
    dqn = build_dqn(config, agent)
    jax = config.backend == "jax"
    decay_steps = max(1, int(config.exploration_fraction * config.total_steps))
    epsilon = AttributeSchedule(
        agent,
        "epsilon",
        epsilon_schedule(config.epsilon_start, config.epsilon_end, decay_steps),
    )

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
        config_keys={
            "env_id": "the game",
            "n_envs": "the sample tree's shape",
            "batch_T": "the sample tree's shape",
            "replay_size": "the replay's shape",
            "repeat_action_probability": "ALE's sticky actions",
            **({"backend": "the learning library"} if jax else {}),
        },
        callbacks=[epsilon],
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, sample_tree, eval_cage),
        # writes policy.pt (torch) or policy.npz (JAX, plays in numpy), which
        # enjoy plays
        policy=policy_export(config)(
            agent,
            env_id=config.env_id,
            env_factory="parllel.envs.atari:make_atari_env",
            observation_space=cage.spaces.observation,
            action_space=cage.spaces.action,
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
