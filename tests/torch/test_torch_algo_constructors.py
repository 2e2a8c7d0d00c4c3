"""Every algorithm receives its optimizer; the old self-building forms warn and
train exactly as before."""

from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.errors import ConfigError
from parllel.replays.transitions import ReplayBatch
from parllel.torch.agents import build_dqn_agent, build_sac_agent
from parllel.torch.algos import (
    DQN,
    PPO,
    SAC,
    EntropyCoefficient,
    adam,
    build_sac_optimizer,
)

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)


def replay_batch(seed=0, discrete=False):
    generator = torch.Generator().manual_seed(seed)
    n = 8
    action = (
        torch.randint(0, 3, (n,), generator=generator)
        if discrete
        else torch.rand(n, 2, generator=generator) * 2 - 1
    )
    return ReplayBatch(
        observation=torch.randn(n, 2, generator=generator),
        action=action,
        reward=torch.randn(n, generator=generator),
        next_observation=torch.randn(n, 2, generator=generator),
        terminated=torch.rand(n, generator=generator) < 0.3,
        truncated=torch.zeros(n, dtype=torch.bool),
        discount=torch.full((n,), 0.99),
        n_steps=torch.ones(n, dtype=torch.int64),
        indices=torch.arange(n),
        weights=torch.ones(n),
    )


def sac_agent(seed=0):
    torch.manual_seed(seed)
    return build_sac_agent(BOX, BOX, hidden_sizes=(8,))


def dqn_agent(seed=0):
    torch.manual_seed(seed)
    return build_dqn_agent(BOX, gym.spaces.Discrete(3), hidden_sizes=(8,))


def train(algo, discrete=False, updates=3):
    for seed in range(updates):
        torch.manual_seed(100 + seed)  # SAC samples actions
        algo.update(replay_batch(seed, discrete))
    return algo


def assert_same_tensors(a, b):
    a, b = list(a), list(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_constructors_agree_the_optimizer_comes_second():
    for algo in (PPO, SAC, DQN):
        parameters = list(inspect.signature(algo).parameters)
        assert parameters[1] == "optimizer", algo.__name__


def test_sac_fixed_alpha_as_a_float():
    agent = sac_agent()
    sac = SAC(agent, build_sac_optimizer(agent, None, 1e-2), 0.2)
    train(sac)
    assert sac.alpha == pytest.approx(0.2)
    assert not sac.learn_alpha


def test_sac_refuses_an_optimizer_that_misses_parameters():
    agent = sac_agent()
    alpha = EntropyCoefficient(1.0)
    without_alpha = build_sac_optimizer(agent, None, 1e-3)
    with pytest.raises(ConfigError, match="misses parameters of alpha"):
        SAC(agent, without_alpha, alpha)
    actor_only = adam(agent.actor.parameters(), 1e-3)
    with pytest.raises(ConfigError, match="agent.critic, alpha"):
        SAC(agent, actor_only, alpha)
    with pytest.raises(ConfigError, match="torch.optim.Optimizer"):
        SAC(agent, list(agent.actor.parameters()), alpha)
    with pytest.raises(TypeError, match="missing required argument: 'alpha'"):
        SAC(agent, build_sac_optimizer(agent, alpha))
    with pytest.raises(TypeError, match="unexpected keyword argument 'learning_rate'"):
        SAC(agent, build_sac_optimizer(agent, alpha), alpha, learning_rate=1e-3)
    with pytest.raises(TypeError, match="optimizer"):
        SAC(agent)
    with pytest.raises(TypeError, match="unexpected keyword argument 'lr'"):
        SAC(agent, build_sac_optimizer(agent, alpha), alpha, lr=1e-3)
    with pytest.raises(ConfigError, match="initial alpha must be a positive number"):
        EntropyCoefficient(0.0)


def test_dqn_refuses_an_optimizer_that_misses_parameters():
    agent = dqn_agent()
    first = next(agent.q_network.parameters())
    with pytest.raises(ConfigError, match="misses parameters of agent.q_network"):
        DQN(agent, adam([first], 1e-3))
    with pytest.raises(ConfigError, match="torch.optim.Optimizer"):
        DQN(agent, object())
