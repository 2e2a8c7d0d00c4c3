"""SAC: the critic target by hand, entropy tuning, state dicts, a bandit that learns."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from parllel import fields
from parllel.errors import ConfigError
from parllel.replays import UniformReplay
from parllel.replays.transitions import ReplayBatch
from parllel.torch.agents.sac_agent import SacAgent, build_sac_agent
from parllel.torch.algos.sac import SAC, EntropyCoefficient, build_sac_optimizer
from parllel.torch.distributions.base import GaussianParams
from parllel.tree import ArrayDict, buffer_from_example


class FixedPolicy:
    """Distribution stub: every next action is 0.5 with log-prob -1."""

    action_dim = 1

    def sample_with_log_prob(self, params):
        leading = params.mean.shape[:-1]
        return torch.full(leading + (1,), 0.5), torch.full(leading, -1.0)


class LinearCritic(nn.Module):
    """q1 = s, q2 = 2 s - 1 with s = sum(observation) + sum(action)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([1.0, 2.0]))

    def forward(self, observation, action):
        s = observation.sum(-1) + action.sum(-1)
        return self.scale[0] * s, self.scale[1] * s - 1.0


class MeanActor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(1, 1)

    def forward(self, observation):
        mean = self.linear(observation)
        return GaussianParams(mean, torch.zeros_like(mean))


def make_sac(agent, initial_alpha=1.0, learning_rate=3e-4, **kwargs):
    """SAC with the usual optimizer: one fused Adam over actor, critic and alpha."""
    alpha = EntropyCoefficient(initial_alpha)
    optimizer = build_sac_optimizer(agent, alpha, learning_rate)
    return SAC(agent, optimizer, alpha, **kwargs)


def _batch(**overrides):
    values = dict(
        observation=torch.zeros(4, 1),
        action=torch.zeros(4, 1),
        reward=torch.tensor([1.0, 2.0, 3.0, 4.0]),
        next_observation=torch.tensor([[1.0], [2.0], [0.0], [-1.0]]),
        terminated=torch.tensor([False, True, False, False]),
        truncated=torch.tensor([False, False, True, False]),
        discount=torch.tensor([0.9, 0.81, 0.9, 0.9]),
        n_steps=torch.tensor([1, 2, 1, 1]),
        indices=torch.arange(4),
        weights=torch.ones(4),
    )
    values.update(overrides)
    return ReplayBatch(**values)


def test_target_matches_hand_computation():
    agent = SacAgent(MeanActor(), LinearCritic(), FixedPolicy())
    sac = make_sac(agent, initial_alpha=0.5)
    # s' + a' = [1.5, 2.5, 0.5, -0.5]; q1 = that, q2 = 2 * that - 1 = [2, 4, 0, -2]
    # min = [1.5, 2.5, 0, -2]; soft value = min - 0.5 * (-1) = [2, 3, 0.5, -1.5]
    # step 1: terminated, no bootstrap; step 2: truncated, bootstrapped
    expected = torch.tensor([1 + 0.9 * 2, 2.0, 3 + 0.9 * 0.5, 4 + 0.9 * -1.5])
    torch.testing.assert_close(sac.target_q(_batch()), expected)
    # the target uses the *target* critic, which follows by polyak averaging
    with torch.no_grad():
        agent.critic.scale.copy_(torch.tensor([10.0, 10.0]))
    torch.testing.assert_close(sac.target_q(_batch()), expected)
    sac.tau = 0.5
    from parllel.torch.algos.off_policy import polyak_update

    polyak_update(sac.target_critic, agent.critic, sac.tau)
    torch.testing.assert_close(sac.target_critic.scale, torch.tensor([5.5, 6.0]))


def test_update_metrics_and_alpha_moves_towards_target_entropy():
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    agent = build_sac_agent(space, space, hidden_sizes=(16,))
    # unreachable target entropy: alpha grows
    sac = make_sac(agent, learning_rate=1e-2, target_entropy=10.0)
    batch = _batch(
        observation=torch.randn(4, 2),
        action=torch.rand(4, 2) * 2 - 1,
        next_observation=torch.randn(4, 2),
    )
    before = [p.detach().clone() for p in agent.critic.parameters()]
    for _ in range(5):
        metrics = sac.update(batch)
    assert set(metrics) >= {
        "q1_loss",
        "q2_loss",
        "pi_loss",
        "alpha",
        "entropy",
        "q1",
        "q2",
        "target_q",
    }
    assert metrics["alpha"] > 1.0
    assert sac.target_entropy == 10.0
    assert make_sac(agent).target_entropy == -2.0  # default: -action_dim
    after = list(agent.critic.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))


def test_state_dict_round_trip():
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (1,), np.float32)
    agent = build_sac_agent(space, space, hidden_sizes=(8,))
    sac = make_sac(agent, initial_alpha=0.3, replay_ratio=0.5)
    sac.update(_batch())
    sac.update_count(3)  # leaves a fractional carry
    state = sac.state_dict()
    other = make_sac(agent, replay_ratio=0.5)
    other.load_state_dict(state)
    assert other.alpha == pytest.approx(sac.alpha)
    assert other.updates_done == 1
    assert other.update_count(1) == sac.update_count(1)
    for a, b in zip(other.target_critic.parameters(), sac.target_critic.parameters()):
        assert torch.equal(a, b)


def test_config_errors():
    space = gym.spaces.Box(-1, 1, (1,), np.float32)
    agent = build_sac_agent(space, space, hidden_sizes=(8,))
    with pytest.raises(ConfigError, match="tau"):
        make_sac(agent, tau=0.0)
    with pytest.raises(ConfigError, match="not both"):
        make_sac(agent, updates_per_optimize=2, replay_ratio=1.0)
    with pytest.raises(ConfigError, match="new_steps"):
        make_sac(agent, replay_ratio=1.0).optimize(replay=None)
    with pytest.raises(ConfigError, match="Box"):
        build_sac_agent(space, gym.spaces.Discrete(2))


def test_sac_learns_a_one_step_bandit():
    """Reward -(a - 0.5)^2, every episode one step long: the mean action goes to 0.5."""
    torch.manual_seed(0)
    T, B, N = 8, 4, 64
    space = gym.spaces.Box(-1, 1, (1,), np.float32)
    agent = build_sac_agent(space, space, hidden_sizes=(32,))
    sac = make_sac(agent, learning_rate=3e-3, updates_per_optimize=8, tau=0.05)

    def alloc(example, padding=0):
        return buffer_from_example(example, (T, B), padding=padding, full_size=N)

    observation = np.zeros(1, np.float32)
    tree = ArrayDict(
        {
            fields.OBSERVATION: alloc(observation, padding=1),
            fields.ACTION: alloc(np.zeros(1, np.float32)),
            fields.REWARD: alloc(np.float32(0)),
            fields.TERMINATED: alloc(np.bool_(False)),
            fields.TRUNCATED: alloc(np.bool_(False)),
            fields.FINAL_OBSERVATION: alloc(observation),
        }
    )
    replay = UniformReplay(tree, 64, np.random.default_rng(0), learning_starts=64)
    agent.set_mode("sample")
    for iteration in range(50):
        if iteration:
            tree.rotate()
        for t in range(T):
            obs = torch.from_numpy(tree[fields.OBSERVATION][t])
            action = agent.step(obs, None, None, None).action.numpy()  # [B, 1]
            tree[fields.ACTION][t] = action
            tree[fields.REWARD][t] = -((action[:, 0] - 0.5) ** 2)
            tree[fields.TERMINATED][t] = True
            tree[fields.FINAL_OBSERVATION][t] = observation
            tree[fields.OBSERVATION][t + 1] = observation  # the reset observation
        replay.record_batch()
        if replay.ready:
            metrics = sac.optimize(replay)
    assert metrics["updates"] == 8
    agent.set_mode("eval")
    greedy = agent.step(torch.zeros(1, 1), None, None, None).action
    assert abs(float(greedy) - 0.5) < 0.1, float(greedy)
    assert metrics["q1"] < 0.05  # no bootstrap: Q is the (negative) reward
