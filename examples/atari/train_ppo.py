"""Train PPO on an Atari game with CleanRL's ppo_atari settings.

    python examples/atari/train_ppo.py                          # Breakout, 10M steps
    python examples/atari/train_ppo.py --env-id ALE/Pong-v5     # another ALE v5 game
    python examples/atari/train_ppo.py --quick                  # a tiny smoke run
    python examples/atari/train_ppo.py --resume runs/atari-ppo-...
    python examples/atari/train_ppo.py --help                   # every Config field is a flag

Needs the ``atari`` extra (ale-py with its bundled ROMs, OpenCV). The envs
are :func:`parllel.envs.atari.make_atari_env`'s standard stack (no-op reset,
frame skip 4 with max-pooling, FIRE reset, 84x84 grayscale, 4 stacked
frames); training envs end an episode at every lost life (episodic life),
with :class:`~parllel.envs.atari.GameTrajInfo` logging whole games; rewards
are clipped to [-1, 1] in the sample tree; evaluation plays whole games. The
model is ``build_actor_critic``'s image default, the Nature CNN with a
512-unit layer and orthogonal init (as CleanRL's ``Agent``). The sample tree
stores each frame once (``frame_stack=4``); PPO's minibatches rebuild the
stacks of the samples they take.

Writes a run directory (config, metadata, progress.csv, TensorBoard logs,
checkpoints, learning_curve.png) under ``runs/``. Ctrl-C stops at the end of
the current batch, writes a checkpoint and prints the command that resumes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import torch

from parllel.builders import (
    add_advantage_estimation,
    add_reward_clipping,
    build_eval_sampler,
    build_sample_tree,
)
from parllel.cages import Cage, CageOptions, build_cage
from parllel.envs.atari import GameTrajInfo, make_atari_env
from parllel.interop import make_envpool_cage
from parllel.runners import OnPolicyRunner, RunSettings
from parllel.runners.cli import parse_config, run_main
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds
from parllel.torch import PolicyExport, TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose

N_EVAL_ENVS = 4
FRAME_STACK = 4  # make_atari_env's and EnvPool's stack_num default


@dataclasses.dataclass
class Config:
    env_id: str = "ALE/Breakout-v5"
    """ALE v5 game (made with frameskip=1; the preprocessing skips frames)"""
    seed: int = 0
    """master seed (python, numpy, torch and every env)"""
    n_envs: int = 8
    """environments stepped side by side"""
    batch_T: int = 128
    """env steps per env per batch (8 x 128 = 1024 samples per update)"""
    total_steps: int = 9_999_360
    """env steps (agent steps, 4 frames each) to train for: CleanRL's 10M in
    whole batches (9,765 of 1,024)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    learning_rate: float = 2.5e-4
    """initial Adam learning rate (decays linearly to 0)"""
    clip_range: float = 0.1
    """PPO ratio clip range, also the value clip range"""
    epochs: int = 4
    """passes over each batch"""
    minibatches: int = 4
    """minibatches per epoch"""
    entropy_coef: float = 0.01
    """weight of the entropy bonus"""
    value_loss_coef: float = 0.5
    """weight of the value loss"""
    max_grad_norm: float = 0.5
    """clip the global gradient norm"""
    repeat_action_probability: float = 0.0
    """ALE's sticky actions (0.25 in Machado et al.'s protocol)"""
    eval_max_frames: int = 108_000
    """ALE frames after which an evaluation game is cut (ALE's v5 limit)"""
    parallel: Literal["process", "serial", "auto"] = "process"
    """where gymnasium envs step: worker processes, this process, or measured"""
    envs: Literal["gymnasium", "envpool"] = "gymnasium"
    """training envs: make_atari_env in a cage, or EnvPool's C++ envs (the envpool
    extra; whole games per episode, as EnvPool reports no game totals per life)"""
    envpool_threads: int = 2
    """EnvPool's stepping threads (with --envs envpool)"""
    run: RunSettings = RunSettings.field(
        eval_interval_steps=250_000,
        eval_episodes=4,
        log_interval_steps=50_000,
        checkpoint_interval_steps=500_000,
    )
    """run directory, console, logging, evaluation and checkpoints"""


QUICK = dict(
    total_steps=512,
    batch_T=32,
    eval_interval_steps=256,
    log_interval_steps=256,
    eval_episodes=N_EVAL_ENVS,
    eval_max_frames=200,
    epochs=1,
)
"""the --quick preset: a tiny smoke run (eval games cut after 200 frames)"""


def build_training_cage(config: Config, seeds: Sequence[int]) -> Cage:
    """The training envs: gymnasium's stack in a cage, or an EnvPool.

    gymnasium: a lost life ends the episode (episodic life) and
    :class:`GameTrajInfo` logs whole games. EnvPool: the same preprocessing
    in C++ (task id without ``ALE/``), whole games per episode, rewards
    unclipped in the env (the sample tree clips them, as with gymnasium).
    """
    if config.envs == "envpool":
        return make_envpool_cage(
            config.env_id.removeprefix("ALE/"),
            config.n_envs,
            options=CageOptions(seed=seeds),
            num_threads=config.envpool_threads,
            episodic_life=False,
            reward_clip=False,
            repeat_action_probability=config.repeat_action_probability,
        )
    return build_cage(
        make_atari_env,
        config.n_envs,
        dict(
            env_id=config.env_id,
            episodic_life=True,
            repeat_action_probability=config.repeat_action_probability,
        ),
        parallel=config.parallel,
        options=CageOptions(seed=seeds, traj_info_type=GameTrajInfo),
    )


def build_agent(spaces: Any) -> ActorCriticAgent:
    """``build_actor_critic``'s image default: Nature CNN, 512 ReLU, orthogonal init."""
    return ActorCriticAgent(*build_actor_critic(spaces.observation, spaces.action))


def main(config: Config, resume: str | None = None) -> dict:
    torch.set_num_threads(1)
    seeds = Seeds.from_master(
        config.seed, n_envs=config.n_envs, n_eval_envs=N_EVAL_ENVS
    )
    run = config.run.start("atari-ppo", config, seeds, resume)

    cage = build_training_cage(config, seeds.envs)
    agent = build_agent(cage.spaces)
    handler = TorchHandler(agent, n_envs=config.n_envs, seed=seeds.actions)
    # one stored frame per step: 7.7 kB per step instead of 57 kB (docs/atari.md)
    sample_tree = build_sample_tree(
        cage, handler, config.batch_T, frame_stack=FRAME_STACK
    )
    # rewards clipped in the tree (the logged returns stay the game's), then GAE
    transform = Compose(
        [
            *add_reward_clipping(sample_tree),
            *add_advantage_estimation(sample_tree, config.gamma, config.gae_lambda),
        ]
    )
    sampler = FeedForwardSampler(cage, handler, sample_tree, transform=transform)
    eval_sampler, eval_cage = build_eval_sampler(
        make_atari_env,
        TorchHandler(agent, n_envs=N_EVAL_ENVS),
        N_EVAL_ENVS,
        config.run.eval_episodes,
        dict(
            env_id=config.env_id,
            repeat_action_probability=config.repeat_action_probability,
            max_num_frames_per_episode=config.eval_max_frames,
        ),
        seed=seeds.eval_envs,
    )

    # the algorithm: CleanRL's ppo_atari (Adam eps 1e-5, clipped value loss,
    # advantages normalized per minibatch, learning rate annealed to 0)
    model, distribution = agent.model, agent.distribution
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, eps=1e-5)
    ppo = PPO(
        ActorCriticEvaluator(model, distribution),
        optimizer,
        learning_rate=linear_schedule(config.learning_rate, 0.0),
        clip_range=config.clip_range,
        value_clip_range=config.clip_range,
        value_loss_coef=config.value_loss_coef,
        entropy_coef=config.entropy_coef,
        max_grad_norm=config.max_grad_norm,
        epochs=config.epochs,
        minibatches=config.minibatches,
        normalize_advantage=True,
        batch_shape=(config.batch_T, config.n_envs),
    )

    runner = OnPolicyRunner(
        sampler,
        ppo,
        config.total_steps,
        checkpoint_objects={"model": model, "transform": transform, "ppo": ppo},
        # a resume keeps what an episode is: refused with another --envs
        # (episodic life or whole games) or --repeat-action-probability
        config_keys={
            "env_id": "the game",
            "n_envs": "the sample tree's shape",
            "batch_T": "the sample tree's shape",
            "envs": "the training episodes: a lost life (gymnasium) or a whole "
            "game (envpool)",
            "repeat_action_probability": "ALE's sticky actions",
        },
        **run.runner_options(config.total_steps, eval_sampler),
    )
    return run.train(
        runner,
        close=(cage, sample_tree, eval_cage),
        # writes policy.pt; python -m parllel.enjoy RUN plays whole games of
        # the run's env_id with the same wrappers (make_atari_env(env_id=...))
        policy=PolicyExport(
            agent,
            env_id=config.env_id,
            env_factory="parllel.envs.atari:make_atari_env",
        ),
    )


if __name__ == "__main__":
    run_main(main, parse_config(Config, quick=QUICK, description=__doc__))
