"""Every algorithm receives its optimizer; the old self-building forms warn and
train exactly as before."""

from __future__ import annotations

import inspect
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.errors import ConfigError
from parllel.replays import ReplayBatch
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


def test_injected_forms_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = sac_agent()
        alpha = EntropyCoefficient(0.5)
        SAC(agent, build_sac_optimizer(agent, alpha, 1e-3), alpha)
        SAC(agent, build_sac_optimizer(agent, None, 1e-3), 0.2)
        agent = dqn_agent()
        DQN(agent, adam(agent.q_network.parameters(), 1e-3))


@pytest.mark.parametrize("learn", [True, False])
def test_deprecated_sac_trains_like_the_injected_form(learn):
    old_agent, new_agent = sac_agent(), sac_agent()
    with pytest.warns(DeprecationWarning, match="build_sac_optimizer"):
        old = SAC(old_agent, learning_rate=1e-2, initial_alpha=0.5, learn_alpha=learn)
    alpha = EntropyCoefficient(0.5, learn=learn)
    new = SAC(new_agent, build_sac_optimizer(new_agent, alpha, 1e-2), alpha)
    train(old), train(new)
    assert_same_tensors(old_agent.actor.parameters(), new_agent.actor.parameters())
    assert_same_tensors(old_agent.critic.parameters(), new_agent.critic.parameters())
    assert old.alpha == new.alpha
    assert (old.alpha != 0.5) is learn
    # the checkpoint format is the same: one's state loads into the other
    state = old.state_dict()
    new.load_state_dict(state)
    assert_same_tensors(
        new.optimizer.state_dict()["state"][0].values(),
        state["optimizers"][0]["state"][0].values(),
    )


def test_deprecated_sac_separate_optimizers_still_work():
    agent = sac_agent()
    actor_optimizer = torch.optim.SGD(agent.actor.parameters(), lr=0.0)
    with pytest.warns(DeprecationWarning):
        sac = SAC(agent, actor_optimizer=actor_optimizer)
    assert len(sac.state_dict()["optimizers"]) == 3  # critic, actor, alpha
    before = [p.detach().clone() for p in agent.actor.parameters()]
    train(sac)
    assert_same_tensors(before, agent.actor.parameters())  # lr 0 for the actor


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
    with pytest.raises(ConfigError, match="learning_rate"):
        SAC(agent, build_sac_optimizer(agent, alpha), alpha, learning_rate=1e-3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'lr'"):
        SAC(agent, build_sac_optimizer(agent, alpha), alpha, lr=1e-3)
    with pytest.raises(ConfigError, match="initial alpha must be positive"):
        EntropyCoefficient(0.0)


def test_deprecated_dqn_trains_like_the_injected_form():
    old_agent, new_agent = dqn_agent(), dqn_agent()
    with pytest.warns(DeprecationWarning, match="adam"):
        old = DQN(old_agent, learning_rate=1e-2, target_update_interval=2)
    new = DQN(
        new_agent,
        adam(new_agent.q_network.parameters(), 1e-2),
        target_update_interval=2,
    )
    train(old, discrete=True), train(new, discrete=True)
    assert_same_tensors(
        old_agent.q_network.parameters(), new_agent.q_network.parameters()
    )
    assert_same_tensors(
        old.target_network.parameters(), new.target_network.parameters()
    )
    with pytest.warns(DeprecationWarning):
        default = DQN(dqn_agent())
    assert default.optimizer.param_groups[0]["lr"] == 1e-3


def test_dqn_refuses_an_optimizer_that_misses_parameters():
    agent = dqn_agent()
    first = next(agent.q_network.parameters())
    with pytest.raises(ConfigError, match="misses parameters of agent.q_network"):
        DQN(agent, adam([first], 1e-3))
    with pytest.raises(ConfigError, match="torch.optim.Optimizer"):
        DQN(agent, object())
