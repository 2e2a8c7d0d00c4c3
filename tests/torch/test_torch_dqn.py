"""DQN: double-Q targets by hand, Huber/weights, target updates, a chain that learns."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from parllel import fields
from parllel.errors import ConfigError
from parllel.replays import PrioritizedReplay
from parllel.replays.transitions import ReplayBatch
from parllel.schedules import epsilon_schedule
from parllel.torch.agents.dqn_agent import DqnAgent, build_dqn_agent
from parllel.torch.algos import adam
from parllel.torch.algos.dqn import DQN
from parllel.tree import ArrayDict, buffer_from_example


def _linear_agent(online=(1.0, 3.0, 2.0)):
    network = nn.Linear(1, 3, bias=False)  # Q(s, a) = w_a * s
    with torch.no_grad():
        network.weight.copy_(torch.tensor(online).reshape(3, 1))
    return DqnAgent(network, 3)


def make_dqn(agent, learning_rate=1e-3, **kwargs):
    """DQN with the usual optimizer: fused Adam over the Q-network."""
    return DQN(agent, adam(agent.q_network.parameters(), learning_rate), **kwargs)


def _batch(**overrides):
    values = dict(
        observation=torch.tensor([[1.0], [1.0], [2.0], [-1.0]]),
        action=torch.tensor([0, 1, 2, 1]),
        reward=torch.tensor([1.0, 2.0, 3.0, 4.0]),
        next_observation=torch.tensor([[1.0], [-1.0], [1.0], [1.0]]),
        terminated=torch.tensor([False, False, True, False]),
        truncated=torch.tensor([False, False, False, True]),
        discount=torch.tensor([0.9, 0.9, 0.9, 0.81]),
        n_steps=torch.tensor([1, 1, 1, 2]),
        indices=torch.arange(4),
        weights=torch.ones(4),
    )
    values.update(overrides)
    return ReplayBatch(**values)


@pytest.mark.parametrize(
    "double, expected",
    [
        # online picks a* = 1 at s' = 1 (Q 3) and a* = 0 at s' = -1; target
        # weights (10, 20, 30): Q_targ(1, 1) = 20, Q_targ(-1, 0) = -10
        (True, [1 + 0.9 * 20, 2 + 0.9 * -10, 3.0, 4 + 0.81 * 20]),
        # plain DQN: max of the target: 30 at s' = 1, -10 at s' = -1
        (False, [1 + 0.9 * 30, 2 + 0.9 * -10, 3.0, 4 + 0.81 * 30]),
    ],
)
def test_targets_by_hand(double, expected):
    dqn = make_dqn(_linear_agent(), double_dqn=double)
    with torch.no_grad():
        dqn.target_network.weight.copy_(torch.tensor([[10.0], [20.0], [30.0]]))
    torch.testing.assert_close(dqn.target_values(_batch()), torch.tensor(expected))


def test_huber_loss_weights_and_priorities():
    agent = _linear_agent()
    dqn = DQN(agent, torch.optim.SGD(agent.q_network.parameters(), lr=0.0))
    weights = torch.tensor([1.0, 0.5, 2.0, 0.0])
    metrics, priorities = dqn.update(_batch(weights=weights))
    # Q(s, a) = [1, 3, 4, -3]; targets (target == online) = [1 + 0.9 * 3,
    # 2 + 0.9 * -1, 3, 4 + 0.81 * 3]
    q = torch.tensor([1.0, 3.0, 4.0, -3.0])
    target = torch.tensor([3.7, 1.1, 3.0, 6.43])
    error = (q - target).abs()
    huber = torch.where(error < 1, 0.5 * error**2, error - 0.5)
    torch.testing.assert_close(priorities, error)
    assert metrics["loss"] == pytest.approx(float((weights * huber).mean()), rel=1e-5)


def test_target_network_updates():
    agent = _linear_agent()
    dqn = make_dqn(agent, target_update_interval=3, learning_rate=0.1)
    initial = dqn.target_network.weight.detach().clone()
    for _ in range(2):
        dqn.update(_batch())
    assert torch.equal(dqn.target_network.weight, initial)
    dqn.update(_batch())
    assert torch.equal(dqn.target_network.weight, agent.q_network.weight)

    agent = _linear_agent()
    dqn = make_dqn(agent, tau=0.5, learning_rate=0.1)
    old_target = dqn.target_network.weight.detach().clone()
    dqn.update(_batch())
    torch.testing.assert_close(
        dqn.target_network.weight, 0.5 * old_target + 0.5 * agent.q_network.weight
    )
    with pytest.raises(ConfigError, match="not both"):
        make_dqn(agent, tau=0.5, target_update_interval=10)
    with pytest.raises(ConfigError, match="target_update_interval"):
        make_dqn(agent, target_update_interval=0)


def test_epsilon_schedule_and_agent():
    schedule = epsilon_schedule(1.0, 0.1, decay_steps=100)
    assert (schedule(0), schedule(50), schedule(1000)) == (
        1.0,
        pytest.approx(0.55),
        0.1,
    )
    with pytest.raises(ConfigError):
        epsilon_schedule(1.5)
    agent = _linear_agent()
    agent.generator = torch.Generator().manual_seed(0)
    observation = torch.ones(2000, 1)
    assert (agent.act(observation, 0.0) == 1).all()
    counts = torch.bincount(agent.act(observation, 1.0), minlength=3)
    assert (counts > 550).all()
    agent.epsilon = 1.0
    agent.set_mode("eval")  # greedy
    assert (agent.step(observation, None, None, None).action == 1).all()


def test_state_dict_round_trip():
    agent = _linear_agent()
    dqn = make_dqn(agent, target_update_interval=100, learning_rate=0.1)
    dqn.update(_batch())
    state = dqn.state_dict()
    other = make_dqn(_linear_agent(), target_update_interval=100)
    other.load_state_dict(state)
    assert other.updates_done == 1
    assert torch.equal(other.target_network.weight, dqn.target_network.weight)
    assert (
        other.optimizer.state_dict()["state"].keys()
        == state["optimizer"]["state"].keys()
    )


def _step_chain(state, action):
    """2-state chain: 0 -a1-> 1 (r 0); 0 -a0-> end (r 0.1); 1 -a1-> end (r 1); 1 -a0-> end (r 0)."""
    if state == 0:
        return (1, 0.0, False) if action == 1 else (0, 0.1, True)
    return 0, (1.0 if action == 1 else 0.0), True


def test_dqn_learns_a_two_state_chain_with_prioritized_replay():
    torch.manual_seed(0)
    T, B, N, gamma = 8, 4, 64, 0.9
    observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
    agent = build_dqn_agent(
        observation_space, gym.spaces.Discrete(2), hidden_sizes=(32,)
    )
    agent.generator = torch.Generator().manual_seed(0)
    dqn = make_dqn(
        agent, learning_rate=1e-2, target_update_interval=20, updates_per_optimize=4
    )
    eye = np.eye(2, dtype=np.float32)

    def alloc(example, padding=0):
        return buffer_from_example(example, (T, B), padding=padding, full_size=N)

    tree = ArrayDict(
        {
            fields.OBSERVATION: alloc(eye[0], padding=1),
            fields.ACTION: alloc(np.int64(0)),
            fields.REWARD: alloc(np.float32(0)),
            fields.TERMINATED: alloc(np.bool_(False)),
            fields.TRUNCATED: alloc(np.bool_(False)),
            fields.FINAL_OBSERVATION: alloc(eye[0]),
        }
    )
    replay = PrioritizedReplay(
        tree, 32, np.random.default_rng(0), learning_starts=64, discount=gamma
    )
    states = [0] * B
    for b in range(B):
        tree[fields.OBSERVATION][0, b] = eye[0]
    for iteration in range(80):
        if iteration:
            tree.rotate()
        for t in range(T):
            obs = torch.from_numpy(tree[fields.OBSERVATION][t])
            actions = agent.act(obs, epsilon=1.0).numpy()  # uniform behaviour
            for b in range(B):
                next_state, reward, done = _step_chain(states[b], int(actions[b]))
                tree[fields.ACTION][t, b] = actions[b]
                tree[fields.REWARD][t, b] = reward
                tree[fields.TERMINATED][t, b] = done
                tree[fields.FINAL_OBSERVATION][t, b] = eye[next_state]
                states[b] = 0 if done else next_state
                tree[fields.OBSERVATION][t + 1, b] = eye[states[b]]
        replay.record_batch()
        if replay.ready:
            metrics = dqn.optimize(replay)
    assert metrics["updates"] == 4
    assert replay.max_priority > 1e-3
    with torch.no_grad():
        q = agent.q_values(torch.from_numpy(eye))  # [state, action]
    expected = torch.tensor([[0.1, gamma * 1.0], [0.0, 1.0]])
    torch.testing.assert_close(q, expected, atol=0.1, rtol=0.0)
    assert agent.q_values(torch.from_numpy(eye)).argmax(-1).tolist() == [1, 1]
