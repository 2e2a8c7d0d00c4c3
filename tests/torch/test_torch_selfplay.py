"""Torch self-play helpers: snapshots, frozen opponents, a SelfPlay of TorchHandlers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.errors import ConfigError
from parllel.multiagent.opponent_pool import OpponentPool
from parllel.multiagent.selfplay import SelfPlay
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.models import build_actor_critic
from parllel.torch.selfplay import (
    frozen_opponent,
    load_snapshot,
    opponent_factory,
    snapshot_state,
)
from tests.helpers.selfplay_envs import A, SelfPlayDriver

B = 4


def make_agent(seed: int = 0) -> ActorCriticAgent:
    torch.manual_seed(seed)
    space = gym.spaces.Box(0, 100, (3,), np.float32)
    return ActorCriticAgent(*build_actor_critic(space, gym.spaces.Discrete(4)))


def test_snapshot_is_a_frozen_cpu_copy():
    agent = make_agent()
    snapshot = snapshot_state(agent)
    before = {k: v.clone() for k, v in snapshot["model"].items()}
    with torch.no_grad():
        for parameter in agent.model.parameters():
            parameter.add_(1.0)
    for key, tensor in snapshot["model"].items():
        assert tensor.device.type == "cpu" and torch.equal(tensor, before[key])


def test_frozen_opponent_plays_the_snapshot_without_gradients():
    agent = make_agent()
    snapshot = snapshot_state(agent)
    observation = torch.rand(5, 3)
    expected = agent.value(observation, None, None, None)
    with torch.no_grad():
        for parameter in agent.model.parameters():
            parameter.mul_(0.5)
    opponent = frozen_opponent(agent, snapshot)
    assert all(not p.requires_grad for p in opponent.model.parameters())
    assert any(p.requires_grad for p in agent.model.parameters())
    torch.testing.assert_close(opponent.value(observation, None, None, None), expected)
    assert opponent.model is not agent.model


def test_load_snapshot_refuses_other_modules():
    with pytest.raises(ConfigError, match="modules"):
        load_snapshot(make_agent(), {"actor": {}})


def test_a_fixed_opponent_given_to_the_snapshot_factory_is_named():
    build = opponent_factory(make_agent())
    with pytest.raises(ConfigError, match=r"got 'random'.*OpponentPool.add_fixed"):
        build("random", 4)


def test_selfplay_with_torch_handlers_records_the_learner_rows():
    agent = make_agent()
    pool = OpponentPool(4, strategy="uniform", seed=0)
    selfplay = SelfPlay(
        TorchHandler(agent, n_envs=B * A),
        opponent_factory(agent),
        pool,
        n_envs=B,
        n_agents=A,
        snapshot_learner=lambda: snapshot_state(agent),
        seed=0,
    )
    example = selfplay.example_outputs(np.zeros((A, 3), np.float32))
    assert set(example.agent_info) == {
        fields.VALUE,
        fields.LOG_PROB,
        fields.POLICY_INDEX,
    }
    driver = SelfPlayDriver(selfplay, B)
    driver.agent_info[fields.LOG_PROB] = np.zeros((B, A), np.float32)
    pool.add(snapshot_state(make_agent(seed=1)))
    for _ in range(12):
        driver.step()
    for entry in driver.log:
        learner = np.zeros((B, A), bool)
        learner[np.arange(B), entry["seat"]] = True
        np.testing.assert_array_equal(entry["policy_index"] == 0, learner)
        assert ((entry["action"] >= 0) & (entry["action"] < 4)).all()
    assert sum(selfplay.total.values()) == 12  # 4 moves per game, 4 envs
