"""JaxHandler: sample trees from its examples, actions written in place,
seeded and checkpointable action draws, deterministic eval mode."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pytest

from parllel import fields
from parllel.builders import add_advantage_estimation, build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.jax import JaxHandler
from parllel.jax.agents import ActorCriticAgent
from parllel.jax.models import build_actor_critic
from parllel.samplers import FeedForwardSampler
from parllel.transforms import Compose

pytestmark = pytest.mark.usefixtures("shared_compilations")


def _agent(action_space: gym.Space) -> ActorCriticAgent:
    obs = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    network, distribution = build_actor_critic(obs, action_space, hidden_sizes=(8,))
    example = np.zeros((1, 4), np.float32)
    return ActorCriticAgent(
        network, distribution, example_observation=example, key=jax.random.key(0)
    )


def test_example_outputs_have_torch_dtypes():
    handler = JaxHandler(_agent(gym.spaces.Discrete(2)), n_envs=3, seed=0)
    example = handler.example_outputs(np.zeros(4, np.float32))
    assert example.action.dtype == np.int64 and example.action.shape == ()
    assert example.agent_info[fields.LOG_PROB].dtype == np.float32
    assert example.state is None
    continuous = JaxHandler(_agent(gym.spaces.Box(-1, 1, (2,))), n_envs=3, seed=0)
    assert continuous.example_outputs(np.zeros(4, np.float32)).action.shape == (2,)


def _collect(seed: int, state=None) -> tuple[np.ndarray, JaxHandler]:
    cage = SerialCage(
        lambda: gym.make("CartPole-v1"), 2, options=CageOptions(seed=[1, 2])
    )
    handler = JaxHandler(_agent(gym.spaces.Discrete(2)), n_envs=2, seed=seed)
    if state is not None:
        handler.generator.set_state(state)
    sample_tree = build_sample_tree(cage, handler, batch_T=6)
    transform = Compose(add_advantage_estimation(sample_tree, 0.99, 0.95))
    sampler = FeedForwardSampler(cage, handler, sample_tree, transform=transform)
    try:
        batch, _ = sampler.collect_batch()
        actions = np.array(batch[fields.ACTION])
        values = np.array(batch[fields.AGENT_INFO][fields.VALUE])
        assert np.isfinite(np.array(batch[fields.ADVANTAGE])).all()
        assert (values != 0).any()
    finally:
        cage.close()
        sample_tree.close()
    return actions, handler


def test_seeded_actions_repeat_and_resume_from_the_key():
    first, handler = _collect(seed=5)
    again, _ = _collect(seed=5)
    np.testing.assert_array_equal(first, again)
    state = handler.generator.get_state()
    resumed, _ = _collect(seed=0, state=state)
    continued, _ = _collect(seed=5, state=state)
    np.testing.assert_array_equal(resumed, continued)


def test_eval_mode_is_greedy():
    agent = _agent(gym.spaces.Discrete(2))
    handler = JaxHandler(agent, n_envs=4, seed=0)
    handler.set_mode("eval")
    observation = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    out_action = np.zeros(4, np.int64)
    info = {
        fields.LOG_PROB: np.zeros(4, np.float32),
        fields.VALUE: np.zeros(4, np.float32),
    }
    handler.step(observation, None, None, out_action=out_action, out_agent_info=info)
    logits = agent.network.apply(
        {"params": agent.params}, observation
    ).dist_params.logits
    np.testing.assert_array_equal(out_action, np.argmax(logits, -1))
    np.testing.assert_allclose(
        handler.value(observation, None, None), info[fields.VALUE], rtol=1e-6
    )
