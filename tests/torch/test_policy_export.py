"""An exported and reloaded policy acts exactly as the agent does through the handler.

For each kind of agent (discrete actor-critic, Gaussian and squashed actor,
DQN, a recurrent actor-critic, a dict observation), the agent's
deterministic actions through :class:`TorchHandler` on observations
normalized as the sampler normalizes them are compared with
``load_policy(export_policy(...)).act(raw observation)``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from parllel.errors import ConfigError
from parllel.torch import Policy, TorchHandler, export_policy, load_policy
from parllel.torch.agents import ActorCriticAgent, build_dqn_agent, build_sac_agent
from parllel.torch.models import build_actor_critic
from parllel.transforms import NormalizeObservations
from parllel.tree import tree_map

CARTPOLE = gym.make("CartPole-v1")
PENDULUM = gym.make("Pendulum-v1")


def observations(space: gym.Space, n: int, seed: int = 0) -> list:
    """``n`` observations of ``space``, spread wider than its samples of inf bounds."""
    space.seed(seed)
    rng = np.random.default_rng(seed)

    def spread(value):
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return (value + rng.normal(0.0, 2.0, value.shape)).astype(value.dtype)
        return value

    return [tree_map(spread, space.sample()) for _ in range(n)]


def stack(observation_list: list):
    return tree_map(lambda *leaves: np.stack(leaves), *observation_list)


def fitted_normalizer(example_batch) -> NormalizeObservations:
    """A normalizer with statistics far from the identity, frozen as in evaluation."""
    leading = tree_map(lambda leaf: leaf[np.newaxis], example_batch)  # [T=1, B, ...]
    normalizer = NormalizeObservations({"observation": leading}, clip=3.0)
    rng = np.random.default_rng(1)
    for stats in normalizer.stats.values():
        shape = (64, *stats.feature_shape)
        stats.update(rng.normal(1.5, 0.3, shape) * (1 + np.arange(shape[-1])))
    normalizer.frozen = True
    return normalizer


def handler_actions(agent, observation_list, normalizer=None) -> np.ndarray:
    """Deterministic actions of ``agent`` through a TorchHandler, as an eval sampler."""
    batch = stack(observation_list)
    batch = tree_map(np.array, batch)  # the sample tree's copy
    if normalizer is not None:
        normalizer.normalize(batch)
    handler = TorchHandler(agent, n_envs=len(observation_list))
    handler.set_mode("eval")
    example = handler.example_outputs(tree_map(lambda leaf: leaf[0], batch)).action
    out = np.zeros(
        (len(observation_list), *np.shape(example)), np.asarray(example).dtype
    )
    handler.step(batch, None, None, out_action=out, out_agent_info={})
    return out


def export_and_load(tmp_path, agent, **kwargs):
    torch.manual_seed(12345)  # the rebuilt agent's own init differs from the agent's
    return load_policy(export_policy(tmp_path / "policy.pt", agent, **kwargs))


def check_same_actions(policy, agent, observation_list, normalizer=None):
    """Bitwise for a batch (the handler's batch size); one observation at a time
    the same up to float rounding (a matrix product over one row may round
    differently) for continuous actions, exactly for discrete ones."""
    expected = handler_actions(agent, observation_list, normalizer)
    np.testing.assert_array_equal(policy.act(stack(observation_list)), expected)
    single = [policy.act(observation) for observation in observation_list]
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(np.asarray(single), expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(single), expected)
    return single


def test_discrete_actor_critic_with_normalizer(tmp_path):
    torch.manual_seed(0)
    space = CARTPOLE.observation_space
    agent = ActorCriticAgent(*build_actor_critic(space, CARTPOLE.action_space))
    obs = observations(space, 32)
    normalizer = fitted_normalizer(stack(obs))
    policy = export_and_load(
        tmp_path, agent, observation_normalizer=normalizer, env_id="CartPole-v1"
    )
    single = check_same_actions(policy, agent, obs, normalizer)
    assert all(type(action) is int for action in single)
    assert all(CARTPOLE.action_space.contains(action) for action in single)
    assert len(set(single)) == 2  # both actions occur: the check can fail
    # the normalizer matters: without it the agent acts differently
    assert not np.array_equal(handler_actions(agent, obs), single)
    assert policy.trained_with["env_id"] == "CartPole-v1"


def test_gaussian_actor_critic_actions_as_the_sampler_gives_them(tmp_path):
    torch.manual_seed(1)
    space, action_space = PENDULUM.observation_space, PENDULUM.action_space
    model, distribution = build_actor_critic(
        space, action_space, shared_trunk=False, init_log_std=-0.5
    )
    with torch.no_grad():  # means beyond the bounds [-2, 2] for some inputs
        model.policy_head.mean.bias.fill_(1.9)
        model.policy_head.mean.weight.mul_(300.0)
    agent = ActorCriticAgent(model, distribution)
    obs = observations(space, 24)
    normalizer = fitted_normalizer(stack(obs))
    policy = export_and_load(tmp_path, agent, observation_normalizer=normalizer)
    single = check_same_actions(policy, agent, obs, normalizer)
    assert all(a.dtype == np.float32 and a.shape == (1,) for a in single)
    assert np.abs(np.asarray(single)).max() > 2.0  # unclipped, as in training

    clipped = load_policy(tmp_path / "policy.pt", clip_actions=True)
    actions = [clipped.act(observation) for observation in obs]
    np.testing.assert_array_equal(
        actions, np.clip(single, -2.0, 2.0).astype(np.float32)
    )
    assert all(action_space.contains(action) for action in actions)


def test_clip_actions_refuses_an_unbounded_action_space(tmp_path):
    # gymnasium's ClipAction makes the space Box(-inf, inf): clipping into it
    # would silently do nothing
    clipped_env = gym.wrappers.ClipAction(gym.make("Pendulum-v1"))
    space, action_space = clipped_env.observation_space, clipped_env.action_space
    agent = ActorCriticAgent(*build_actor_critic(space, action_space))
    path = export_policy(tmp_path / "policy.pt", agent)
    assert isinstance(load_policy(path), Policy)  # without clipping it loads
    with pytest.raises(ConfigError, match="no finite bound.*ClipAction"):
        load_policy(path, clip_actions=True)


def test_squashed_sac_actor(tmp_path):
    torch.manual_seed(2)
    space, action_space = PENDULUM.observation_space, PENDULUM.action_space
    agent = build_sac_agent(space, action_space, hidden_sizes=(32, 32))
    obs = observations(space, 16)
    policy = export_and_load(tmp_path, agent, algorithm="SAC")
    single = check_same_actions(policy, agent, obs)
    assert all(action_space.contains(action) for action in single)
    stochastic = [policy.act(obs[0], deterministic=False) for _ in range(8)]
    assert len({float(a[0]) for a in stochastic}) > 1
    assert all(action_space.contains(action) for action in stochastic)


def test_dqn_is_greedy_and_keeps_its_epsilon(tmp_path):
    torch.manual_seed(3)
    space = CARTPOLE.observation_space
    agent = build_dqn_agent(space, CARTPOLE.action_space, hidden_sizes=(32,))
    agent.epsilon = 0.25  # where the schedule left it
    obs = observations(space, 32)
    policy = export_and_load(tmp_path, agent, algorithm="DQN")
    single = check_same_actions(policy, agent, obs)
    assert len(set(single)) == 2
    assert policy.agent.epsilon == 0.25


def test_recurrent_policy_keeps_state_and_resets(tmp_path):
    torch.manual_seed(0)
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    model, distribution = build_actor_critic(
        space,
        gym.spaces.Discrete(3),
        hidden_sizes=(16,),
        recurrent_cell="lstm",
        recurrent_size=8,
    )
    with torch.no_grad():  # a memory that matters: actions depend on the state
        for parameter in model.parameters():
            parameter.mul_(6.0)
    agent = ActorCriticAgent(model, distribution)
    steps = np.random.default_rng(0).uniform(-1, 1, (8, 2, 2)).astype(np.float32)
    steps[:4, 1] += 2.0  # env 1's first episode leaves a state the reset clears
    reset_at = 4  # env 1 starts a new episode at this step

    handler = TorchHandler(agent, n_envs=2)
    handler.set_mode("eval")
    expected = []
    for t, pair in enumerate(steps):
        if t == reset_at:
            handler.reset_one(1)
        out = np.zeros(2, np.int64)
        handler.step(stack(pair), None, None, out_action=out, out_agent_info={})
        expected.append(out)
    expected = np.asarray(expected)  # [T, B]
    assert len(np.unique(expected)) > 1

    policy = export_and_load(tmp_path, agent)
    assert policy.recurrent
    batched = []
    for t, pair in enumerate(steps):
        if t == reset_at:
            policy.reset([1])
        batched.append(policy.act(stack(pair)))
    np.testing.assert_array_equal(batched, expected)

    # one env at a time, as in a gymnasium loop: reset() between episodes
    for env in (0, 1):
        policy.reset()
        actions = []
        for t, pair in enumerate(steps):
            if env == 1 and t == reset_at:
                policy.reset()
            actions.append(policy.act(pair[env]))
        np.testing.assert_array_equal(actions, expected[:, env])

    # without the reset, the state carries over and the actions differ (so
    # the comparisons above see whether reset() works)
    policy.reset()
    carried = [policy.act(pair[1]) for pair in steps]
    assert carried[reset_at:] != list(expected[reset_at:, 1])


def test_dict_observations_with_a_normalized_leaf(tmp_path):
    torch.manual_seed(5)
    space = gym.spaces.Dict(
        {
            "position": gym.spaces.Box(-5.0, 5.0, (3,), np.float32),
            "mode": gym.spaces.Discrete(4),
        }
    )
    agent = ActorCriticAgent(*build_actor_critic(space, gym.spaces.Discrete(5)))
    obs = observations(space, 20)
    batch = stack(obs)
    normalizer = NormalizeObservations(
        {"observation": tree_map(lambda leaf: leaf[np.newaxis], batch)},
        leaves=["position"],
    )
    normalizer.stats["position"].update(np.random.default_rng(0).normal(2, 3, (50, 3)))
    normalizer.frozen = True
    policy = export_and_load(tmp_path, agent, observation_normalizer=normalizer)
    check_same_actions(policy, agent, obs, normalizer)


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((2, 2, 4)), np.zeros(())])
def test_observation_of_the_wrong_shape_is_named(tmp_path, bad):
    from parllel.errors import ShapeError

    agent = ActorCriticAgent(
        *build_actor_critic(CARTPOLE.observation_space, CARTPOLE.action_space)
    )
    policy = export_and_load(tmp_path, agent)
    with pytest.raises(ShapeError, match=r"\(4,\)"):
        policy.act(bad)
