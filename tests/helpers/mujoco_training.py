"""Tiny PPO and SAC runs on gymnasium's MuJoCo envs, as a new user builds them.

No wrapper: the envs' float64 observations go straight into the sample tree
(or, with ``observation_dtype``, are stored as that dtype), observation
normalization is on, and the runners drive sampling and updates.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from parllel.builders import (
    add_advantage_estimation,
    add_obs_normalization,
    add_reward_normalization,
    build_replay_tree,
    build_sample_tree,
)
from parllel.cages import CageOptions, build_cage
from parllel.envs.mujoco import make_mujoco_env
from parllel.replays import UniformReplay
from parllel.runners import OffPolicyRunner, OnPolicyRunner
from parllel.samplers import FeedForwardSampler, RecurrentSampler
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent, build_sac_agent
from parllel.torch.algos import (
    PPO,
    SAC,
    ActorCriticEvaluator,
    EntropyCoefficient,
    build_sac_optimizer,
)
from parllel.torch.models import build_actor_critic
from parllel.transforms import Compose

MUJOCO_V5 = (
    "Ant-v5",
    "HalfCheetah-v5",
    "Hopper-v5",
    "Humanoid-v5",
    "HumanoidStandup-v5",
    "InvertedDoublePendulum-v5",
    "InvertedPendulum-v5",
    "Pusher-v5",
    "Reacher-v5",
    "Swimmer-v5",
    "Walker2d-v5",
)


def make_env(env_id: str) -> gym.Env:
    """The env as ``gym.make`` returns it (no wrapper of ours; MuJoCo's
    settotalmass notice muted)."""
    return make_mujoco_env(env_id)


def _finite_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    values = {k: float(v) for k, v in metrics.items() if np.ndim(v) == 0}
    bad = {k: v for k, v in values.items() if not np.isfinite(v)}
    assert not bad, f"non-finite metrics: {bad}"
    return values


def ppo_iteration(
    env_id: str,
    *,
    parallel: str = "serial",
    recurrent: bool = False,
    observation_dtype: Any = None,
    n_envs: int = 2,
    batch_T: int = 32,
) -> dict[str, Any]:
    """One batch and one PPO update (2 epochs, 2 minibatches); returns what ran."""
    factory = functools.partial(make_env, env_id)
    cage = build_cage(factory, n_envs, parallel=parallel, options=CageOptions(seed=0))
    sample_tree = None
    try:
        model, distribution = build_actor_critic(
            cage.spaces.observation,
            cage.spaces.action,
            hidden_sizes=(16, 16),
            shared_trunk=False,
            recurrent_cell="lstm" if recurrent else None,
            recurrent_size=16,
        )
        agent = ActorCriticAgent(model, distribution)
        handler = TorchHandler(agent, n_envs=cage.n_envs)
        sample_tree = build_sample_tree(
            cage,
            handler,
            batch_T,
            recurrent=recurrent,
            observation_dtype=observation_dtype,
        )
        normalizer = add_obs_normalization(sample_tree)
        transform = Compose(
            add_reward_normalization(sample_tree, 0.99, clip=10.0)
            + add_advantage_estimation(sample_tree, 0.99, 0.95, normalize=True)
        )
        sampler_type = RecurrentSampler if recurrent else FeedForwardSampler
        sampler = sampler_type(
            cage,
            handler,
            sample_tree,
            transform=transform,
            observation_normalizer=normalizer,
        )
        ppo = PPO(
            ActorCriticEvaluator(model, distribution),
            torch.optim.Adam(model.parameters(), 3e-4),
            epochs=2,
            minibatches=2,
            recurrent=recurrent,
            batch_shape=(batch_T, n_envs),
        )
        before = [p.detach().clone() for p in model.parameters()]
        runner = OnPolicyRunner(sampler, ppo, batch_T * n_envs, handle_interrupt=False)
        runner.run()
        changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        return {
            "observation_dtype": sample_tree["observation"].dtype,
            "normalized_count": float(normalizer.stats[""].count),
            "changed": changed,
            "env_steps": runner.env_steps,
        }
    finally:
        cage.close()
        if sample_tree is not None:
            sample_tree.close()


def sac_updates(
    env_id: str,
    *,
    parallel: str = "serial",
    observation_dtype: Any = None,
    n_envs: int = 2,
    batch_T: int = 8,
    learning_starts: int = 32,
    total_steps: int = 64,
) -> dict[str, Any]:
    """A few SAC updates from a small replay (observations normalized)."""
    factory = functools.partial(make_env, env_id)
    cage = build_cage(factory, n_envs, parallel=parallel, options=CageOptions(seed=0))
    replay_tree = None
    try:
        agent = build_sac_agent(
            cage.spaces.observation, cage.spaces.action, hidden_sizes=(16, 16)
        )
        handler = TorchHandler(agent, n_envs=cage.n_envs)
        replay_tree = build_replay_tree(
            cage,
            handler,
            batch_T,
            256,
            storage="shared" if parallel == "process" else "local",
            observation_dtype=observation_dtype,
        )
        normalizer = add_obs_normalization(replay_tree)
        replay = UniformReplay(
            replay_tree,
            16,
            np.random.default_rng(0),
            learning_starts=learning_starts,
            discount=0.99,
        )
        sampler = FeedForwardSampler(
            cage, handler, replay_tree, observation_normalizer=normalizer
        )
        alpha = EntropyCoefficient(1.0)
        sac = SAC(agent, build_sac_optimizer(agent, alpha, learning_rate=3e-4), alpha)
        before = [p.detach().clone() for p in agent.actor.parameters()]
        runner = OffPolicyRunner(
            sampler, replay, sac, total_steps, handle_interrupt=False
        )
        runner.run()
        changed = any(
            not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters())
        )
        return {
            "observation_dtype": replay_tree["observation"].dtype,
            "changed": changed,
            "env_steps": runner.env_steps,
        }
    finally:
        cage.close()
        if replay_tree is not None:
            replay_tree.close()


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], float]:
    """``fn(*args, **kwargs)`` and its wall time in seconds."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start
