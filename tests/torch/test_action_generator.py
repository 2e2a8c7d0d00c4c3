"""Agents draw their actions from the handler's generator (``seed=``), not
from torch's global RNG, which the learner also draws from."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel import fields
from parllel.agents import AgentStep
from parllel.errors import ConfigError
from parllel.seeding import Seeds, actions_seed
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent, build_dqn_agent, build_sac_agent
from parllel.torch.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.torch.distributions.base import DistParams, GaussianParams
from parllel.torch.models import build_actor_critic
from parllel.torch.selfplay import frozen_opponent, snapshot_state

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
N = 5


def actor_critic(recurrent: bool = False, box: bool = False) -> ActorCriticAgent:
    action = gym.spaces.Box(-1, 1, (2,), np.float32) if box else gym.spaces.Discrete(4)
    model, distribution = build_actor_critic(
        OBS,
        action,
        hidden_sizes=(8,),
        recurrent_cell="gru" if recurrent else None,
        recurrent_size=4,
    )
    return ActorCriticAgent(model, distribution)


def sac(random_actions: bool = False):
    agent = build_sac_agent(
        OBS, gym.spaces.Box(-2, 2, (2,), np.float32), hidden_sizes=(8,)
    )
    agent.random_actions = random_actions
    return agent


def dqn():
    agent = build_dqn_agent(OBS, gym.spaces.Discrete(4), hidden_sizes=(8,))
    agent.epsilon = 0.5
    return agent


AGENTS = {
    "categorical": actor_critic,
    "gaussian": lambda: actor_critic(box=True),
    "recurrent": lambda: actor_critic(recurrent=True),
    "sac": sac,
    "sac-random-actions": lambda: sac(random_actions=True),
    "dqn-epsilon-greedy": dqn,
}


def run(make_agent, learner_draws: bool, steps: int = 4) -> list[np.ndarray]:
    """The actions of ``steps`` handler steps; with ``learner_draws`` the
    global RNG is drawn from between steps, as a learner's shuffling does."""
    torch.manual_seed(0)
    agent = make_agent()
    handler = TorchHandler(agent, N, seed=Seeds.from_master(3).actions)
    observation = np.linspace(-1, 1, N * 3, dtype=np.float32).reshape(N, 3)
    example = handler.example_outputs(observation[0])
    actions = []
    for _ in range(steps):
        out_action = np.zeros((N, *np.shape(example.action)), example.action.dtype)
        out_info = {
            key: np.zeros((N, *np.shape(value)), np.asarray(value).dtype)
            for key, value in example.agent_info.items()
        }
        handler.step(
            observation, None, None, out_action=out_action, out_agent_info=out_info
        )
        actions.append(out_action)
        if learner_draws:
            torch.randperm(100)
            torch.randn(7)
    return actions


@pytest.mark.parametrize("name", list(AGENTS))
def test_actions_ignore_the_global_rng_when_the_handler_has_a_seed(name):
    quiet, drawing = run(AGENTS[name], False), run(AGENTS[name], True)
    for a, b in zip(quiet, drawing, strict=True):
        np.testing.assert_array_equal(a, b)
    # and they are random: not one action repeated every step
    assert len({a.tobytes() for a in quiet}) > 1


def test_another_actions_seed_draws_other_actions():
    def first_actions(seed: int) -> np.ndarray:
        torch.manual_seed(0)
        handler = TorchHandler(actor_critic(), 64, seed=seed)
        observation = np.zeros((64, 3), np.float32)
        out = np.zeros(64, np.int64)
        info = {
            fields.LOG_PROB: np.zeros(64, np.float32),
            fields.VALUE: np.zeros(64, np.float32),
        }
        handler.step(observation, None, None, out_action=out, out_agent_info=info)
        return out

    assert np.array_equal(first_actions(1), first_actions(1))
    assert not np.array_equal(first_actions(1), first_actions(2))


def test_the_handler_seed_needs_an_agent_with_a_generator():
    class NoGenerator:
        def initial_state(self, n_envs):
            return None

        def step(self, observation, prev_action, prev_reward, state):
            return AgentStep(torch.zeros(len(observation)), {})

        def set_mode(self, mode):
            pass

    with pytest.raises(ConfigError, match="no `generator` attribute"):
        TorchHandler(NoGenerator(), 2, seed=0)
    handler = TorchHandler(NoGenerator(), 2)  # no seed: the global RNG
    assert handler.generator is None


def test_the_handler_generator_is_the_agents():
    agent = actor_critic()
    handler = TorchHandler(agent, 2, seed=4)
    assert handler.generator is agent.generator
    assert handler.generator.initial_seed() == 4


@pytest.mark.parametrize(
    "distribution, params",
    [
        (Categorical(4), DistParams(torch.zeros(6, 4))),
        (Gaussian(2), GaussianParams(torch.zeros(6, 2), torch.zeros(2))),
        (SquashedGaussian(2), GaussianParams(torch.zeros(6, 2), torch.zeros(2))),
    ],
)
def test_distributions_sample_from_the_given_generator_only(distribution, params):
    torch.manual_seed(0)
    global_state = torch.get_rng_state()
    first = distribution.sample(params, torch.Generator().manual_seed(9))
    again = distribution.sample(params, torch.Generator().manual_seed(9))
    assert torch.equal(first, again)
    assert torch.equal(torch.get_rng_state(), global_state)  # untouched


def test_a_frozen_opponent_draws_its_own_actions():
    agent = actor_critic()
    TorchHandler(agent, 2, seed=Seeds.from_master(0).actions)
    opponent = frozen_opponent(agent, snapshot_state(agent))
    assert opponent.generator is not agent.generator
    assert not torch.equal(
        torch.rand(8, generator=opponent.generator),
        torch.rand(8, generator=agent.generator),
    )


def test_ray_actors_get_their_own_action_streams():
    seeds = Seeds.from_master(12)
    assert actions_seed(12, 0) == seeds.actions
    assert len({actions_seed(12, i) for i in range(8)}) == 8
