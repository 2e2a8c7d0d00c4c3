"""The parllel side of ``train_mujoco.py``: PPO and SAC on a MuJoCo env.

The torch runs live here with what both backends share (the env, the PPO
sample tree and its transforms, the runner's phase timings); the JAX runs
are in ``_mujoco_jax.py``. Each run returns a :class:`Timed`.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from _mujoco_sb3 import Timed
from _training import training_sampler

from parllel.builders import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_replay_tree,
    build_sample_tree,
)
from parllel.cages import Cage, CageOptions, EnvSpaces, build_cage
from parllel.replays import UniformReplay
from parllel.runners import Callback, OffPolicyRunner, OnPolicyRunner
from parllel.runners.off_policy import AttributeSchedule
from parllel.samplers import FeedForwardSampler
from parllel.schedules import linear_schedule
from parllel.seeding import Seeds, seed_everything
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent, build_sac_agent
from parllel.torch.algos import PPO, SAC, ActorCriticEvaluator, EntropyCoefficient
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose

PPO_NETWORK: dict[str, Any] = dict(
    hidden_sizes=(64, 64), shared_trunk=False, init_log_std=0.0, orthogonal_init=True
)
"""CleanRL's PPO networks: separate 64x64 tanh trunks, orthogonal init, log-std 0"""


def make_env(env_id: str, episode_steps: int | None, clip_actions: bool) -> gym.Env:
    """The MuJoCo env (actions clipped into the space for PPO, as CleanRL)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        env = gym.make(env_id, max_episode_steps=episode_steps)
    return gym.wrappers.ClipAction(env) if clip_actions else env


def env_spaces(env_id: str, clip_actions: bool = True) -> EnvSpaces:
    """The observation and action spaces of ``env_id``."""
    probe = make_env(env_id, None, clip_actions)
    try:
        return EnvSpaces(probe.observation_space, probe.action_space)
    finally:
        probe.close()


def box_action(spaces: EnvSpaces) -> gym.spaces.Box:
    """The action space of ``spaces``, which SAC needs to be a Box."""
    if not isinstance(spaces.action, gym.spaces.Box):
        raise TypeError(f"SAC needs a Box action space; got {spaces.action}")
    return spaces.action


class Record(Callback):
    """Adds the runner's sample/update seconds and the episodes' returns to ``timed``."""

    def __init__(self, timed: Timed) -> None:
        self.timed = timed

    def on_collect_end(self, runner: Any, batch: Any, traj_infos: list) -> None:
        self.timed.returns.extend(float(t.return_) for t in traj_infos)

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        seconds = runner.phase_times.take()["seconds"]  # no logger reads them
        for phase in ("sample", "update"):
            self.timed.add(phase, seconds.get(phase, 0.0))


def timed_run(runner: Any, timed: Timed) -> Timed:
    """``runner.run()``, its wall seconds and env steps recorded in ``timed``."""
    start = time.perf_counter()
    runner.run()
    timed.seconds = time.perf_counter() - start
    timed.steps = int(runner.env_steps)
    return timed


def ppo_cage(hp: dict, seed: int, parallel: str) -> Cage:
    """PPO's ``hp["n_envs"]`` envs, actions clipped."""
    factory = functools.partial(make_env, hp["env_id"], hp["episode_steps"], True)
    cage = build_cage(
        factory, hp["n_envs"], parallel=parallel, options=CageOptions(seed=seed)
    )
    layout = getattr(cage, "layout", None)
    print(f"    cage ({parallel}): {type(cage).__name__} {layout or ''}", flush=True)
    return cage


def ppo_sampler(cage: Cage, handler: Any, hp: dict) -> FeedForwardSampler:
    """The [n_steps, n_envs] sample tree of ``handler``: observations
    normalized as they arrive; rewards scaled, then GAE, after each batch."""
    tree = build_sample_tree(cage, handler, hp["n_steps"])
    normalizer = add_obs_normalization(tree, clip=hp["clip"])
    transform = Compose(
        add_reward_normalization(tree, hp["gamma"], clip=hp["clip"])
        + add_advantage_estimation(tree, hp["gamma"], hp["gae_lambda"])
    )
    return FeedForwardSampler(
        cage, handler, tree, transform=transform, observation_normalizer=normalizer
    )


def build_ppo_sampler(
    hp: dict, seed: int, parallel: str, agent: Any = None, weights: Any = None
) -> FeedForwardSampler:
    """The torch training sampler: ``agent``'s, or (in a background process)
    one whose new agent follows the learner's ``weights``."""
    torch.set_num_threads(1)
    cage = ppo_cage(hp, seed, parallel)
    if agent is None:
        agent = ActorCriticAgent(
            *build_actor_critic(
                cage.spaces.observation, cage.spaces.action, **PPO_NETWORK
            )
        )
    handler = TorchHandler(agent, n_envs=cage.n_envs)
    if weights is not None:
        handler.follow_weights(weights)
    return ppo_sampler(cage, handler, hp)


def run_ours_ppo(
    hp: dict, seed: int, parallel: str, fused_adam: bool, max_lag: int | None
) -> Timed:
    """One torch PPO run; with ``max_lag`` the sampler runs in a background process."""
    seed_everything(Seeds.from_master(seed, n_envs=hp["n_envs"]))
    spaces = env_spaces(hp["env_id"])
    model, distribution = build_actor_critic(
        spaces.observation, spaces.action, **PPO_NETWORK
    )
    agent = ActorCriticAgent(model, distribution)
    args = (hp, seed, parallel)
    with training_sampler(build_ppo_sampler, args, agent, hp["n_envs"], max_lag) as (
        sampler,
        publisher,
    ):
        optimizer = torch.optim.Adam(
            model.parameters(), lr=hp["learning_rate"], eps=1e-5, fused=fused_adam
        )
        ppo = PPO(
            ActorCriticEvaluator(model, distribution),
            optimizer,
            learning_rate=linear_schedule(hp["learning_rate"], 0.0),
            clip_range=hp["clip_range"],
            value_clip_range=hp["clip_range"],
            value_loss_coef=0.5,  # x parllel's 0.5 x MSE
            max_grad_norm=0.5,
            epochs=hp["epochs"],
            minibatches=hp["minibatches"],
            normalize_advantage=True,
        )
        timed = Timed()
        runner = OnPolicyRunner(
            sampler, ppo, hp["total_steps"], callbacks=[Record(timed)],
            publisher=publisher,
        )  # fmt: skip
        return timed_run(runner, timed)


def sac_replay(
    hp: dict, seeds: Seeds, handler_for: Any
) -> tuple[FeedForwardSampler, UniformReplay, Cage]:
    """SAC's one env, its full-size replay tree and the uniform replay;
    ``handler_for(cage)`` builds the handler."""
    factory = functools.partial(make_env, hp["env_id"], hp["episode_steps"], False)
    cage = build_cage(
        factory, 1, parallel="serial", options=CageOptions(seed=seeds.envs)
    )
    handler = handler_for(cage)
    tree = build_replay_tree(
        cage, handler, 1, hp["replay_size"], observation_dtype=np.float32
    )
    replay = UniformReplay(
        tree, hp["batch_size"], np.random.default_rng(seeds.replay),
        learning_starts=hp["learning_starts"], discount=hp["gamma"],
    )  # fmt: skip
    return FeedForwardSampler(cage, handler, tree), replay, cage


def run_sac_runner(
    hp: dict, agent: Any, sampler: FeedForwardSampler, replay: Any, sac: Any
) -> Timed:
    """The off-policy run (random actions until learning starts, a log line
    every 5,000 steps as the example's), timed; the cage and the replay tree
    closed afterwards."""
    timed = Timed()
    warmup = AttributeSchedule(
        agent, "random_actions", lambda step: step < hp["learning_starts"]
    )
    runner = OffPolicyRunner(
        sampler,
        replay,
        sac,
        hp["total_steps"],
        callbacks=[warmup, Record(timed)],
        log_interval_steps=5_000,  # as examples/mujoco/train_sac.py
    )
    try:
        return timed_run(runner, timed)
    finally:
        sampler.cages[0].close()
        sampler.sample_tree.close()


def run_ours_sac(hp: dict, seed: int, fused_adam: bool) -> Timed:
    """One torch SAC run as ``examples/mujoco/train_sac.py`` (log-std bounds as SB3's)."""
    seeds = Seeds.from_master(seed, n_envs=1)
    seed_everything(seeds)
    spaces = env_spaces(hp["env_id"], clip_actions=False)
    agent = build_sac_agent(spaces.observation, box_action(spaces))
    sampler, replay, _ = sac_replay(
        hp, seeds, lambda cage: TorchHandler(agent, n_envs=1, seed=seeds.actions)
    )
    alpha = EntropyCoefficient(1.0)
    optimizer = torch.optim.Adam(
        [
            {"params": agent.actor.parameters(), "lr": hp["policy_lr"]},
            {"params": agent.critic.parameters()},
            {"params": [alpha.log_alpha]},
        ],
        lr=hp["q_lr"],
        fused=fused_adam,
    )
    sac = SAC(agent, optimizer, alpha, tau=hp["tau"], replay_ratio=1.0)
    return run_sac_runner(hp, agent, sampler, replay, sac)
