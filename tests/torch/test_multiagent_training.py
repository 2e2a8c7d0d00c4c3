"""flatten_agents: PPO on a masked multi-agent batch = PPO on the acted rows only."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parllel import fields
from parllel.arrays import Array
from parllel.errors import (
    CheckpointMismatchError,
    ConfigError,
    ShapeError,
    TreeStructureError,
)
from parllel.torch import TorchHandler
from parllel.torch.agents import ActorCriticAgent
from parllel.torch.algos import PPO, ActorCriticEvaluator, FlattenAgents, PerPolicy
from parllel.torch.algos.multiagent import flatten_agents
from parllel.torch.models import build_actor_critic
from parllel.transforms import MultiAgentGAE
from parllel.tree import ArrayDict

SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
OBS_DIM, N_ACTIONS = 3, 4


def _model(seed=0):
    torch.manual_seed(seed)
    return build_actor_critic(
        gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32),
        gym.spaces.Discrete(N_ACTIONS),
        hidden_sizes=(8,),
    )


def _array(data):
    array = Array(
        batch_shape=data.shape[:2], feature_shape=data.shape[2:], dtype=data.dtype
    )
    array.to_ndarray()[...] = data
    return array


def ma_sample_tree(model, dist, T=5, B=3, A=2, seed=0, n_policies=1):
    """A multi-agent sample tree of Arrays as a sampler and MultiAgentGAE leave it."""
    rng = np.random.default_rng(seed)
    observation = rng.normal(size=(T, B, A, OBS_DIM)).astype(np.float32)
    with torch.no_grad():
        out = model(torch.from_numpy(observation).reshape(T, B * A, OBS_DIM))
        action = dist.sample(out.dist_params)
        log_prob = dist.log_likelihood(action, out.dist_params)
    reshape = lambda x: x.reshape(T, B, A).numpy()  # noqa: E731
    tree = ArrayDict(
        {
            fields.OBSERVATION: _array(observation),
            fields.ACTION: _array(reshape(action)),
            fields.DONE: _array(rng.random((T, B)) < 0.2),
            fields.ENV_INFO: ArrayDict(
                {
                    fields.AGENT_REWARD: _array(
                        rng.normal(size=(T, B, A)).astype(np.float32)
                    ),
                    fields.AGENT_MASK: _array(rng.random((T, B, A)) < 0.6),
                    fields.AGENT_TERMINATED: _array(rng.random((T, B, A)) < 0.1),
                    fields.AGENT_TRUNCATED: _array(np.zeros((T, B, A), bool)),
                }
            ),
            fields.AGENT_INFO: ArrayDict(
                {
                    fields.LOG_PROB: _array(reshape(log_prob)),
                    fields.VALUE: _array(reshape(out.value)),
                    fields.POLICY_INDEX: _array(
                        rng.integers(0, n_policies, (T, B, A)).astype(np.int16)
                    ),
                }
            ),
            fields.BOOTSTRAP_VALUE: rng.normal(size=(B, A)).astype(np.float32),
        }
    )
    MultiAgentGAE(tree, gamma=0.9, gae_lambda=0.95, truncation_as_termination=True)
    return tree


def compact(tree, keep):
    """The acted rows only, as a flat single-agent batch [1, N]."""

    def rows(leaf):
        data = torch.from_numpy(
            np.asarray(leaf.to_ndarray() if isinstance(leaf, Array) else leaf)
        )
        return data[torch.from_numpy(keep)][None]  # [1, N, ...]

    return {
        fields.OBSERVATION: rows(tree[fields.OBSERVATION]),
        fields.ACTION: rows(tree[fields.ACTION]),
        fields.ADVANTAGE: rows(tree[fields.ADVANTAGE]),
        fields.RETURN: rows(tree[fields.RETURN]),
        fields.AGENT_INFO: {
            fields.LOG_PROB: rows(tree[fields.AGENT_INFO][fields.LOG_PROB]),
            fields.VALUE: rows(tree[fields.AGENT_INFO][fields.VALUE]),
        },
    }


def _ppo(model, dist, **kwargs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return PPO(
        ActorCriticEvaluator(model, dist), optimizer, epochs=1, minibatches=1,
        max_grad_norm=None, **kwargs,
    )  # fmt: skip


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    normalize=st.booleans(),
    policy_index=st.sampled_from([None, 0, 1]),
)
def test_ppo_on_flattened_agents_equals_ppo_on_acted_rows(
    seed, normalize, policy_index
):
    model, dist = _model(seed % 5)
    tree = ma_sample_tree(model, dist, seed=seed, n_policies=2)
    keep = tree[fields.ENV_INFO][fields.AGENT_MASK].to_ndarray().copy()
    if policy_index is not None:
        keep &= (
            tree[fields.AGENT_INFO][fields.POLICY_INDEX].to_ndarray() == policy_index
        )
    if not keep.any():
        return
    twin = copy.deepcopy(model)
    flat_ppo = FlattenAgents(
        _ppo(model, dist, normalize_advantage=normalize), policy_index
    )
    metrics = flat_ppo.optimize(tree)
    reference = _ppo(twin, dist, normalize_advantage=normalize).optimize(
        compact(tree, keep)
    )
    for name in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert metrics[name] == pytest.approx(reference[name], rel=1e-5, abs=1e-6)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_flatten_agents_layout_and_views():
    model, dist = _model()
    tree = ma_sample_tree(model, dist, T=4, B=3, A=2, seed=1)
    flat = flatten_agents(tree)
    obs = tree[fields.OBSERVATION].to_ndarray()
    assert flat[fields.OBSERVATION].shape == (4, 6, OBS_DIM)
    # column b * A + a is agent a of env b, and the reshape shares memory
    assert torch.equal(
        flat[fields.OBSERVATION][2, 1 * 2 + 1], torch.from_numpy(obs[2, 1, 1])
    )
    obs[0, 0, 0, 0] = 42.0
    assert flat[fields.OBSERVATION][0, 0, 0] == 42.0
    mask = tree[fields.ENV_INFO][fields.AGENT_MASK].to_ndarray()
    assert torch.equal(flat[fields.VALID], torch.from_numpy(mask.reshape(4, 6)))
    done = tree[fields.DONE].to_ndarray()
    assert torch.equal(flat[fields.DONE], torch.from_numpy(np.repeat(done, 2, axis=1)))
    assert flat[fields.AGENT_INFO][fields.POLICY_INDEX].shape == (4, 6)
    # the env-level valid (wait-reset) is and-ed in
    tree[fields.VALID] = np.zeros((4, 3), bool)
    assert not flatten_agents(tree)[fields.VALID].any()


def test_flatten_agents_errors_name_the_field():
    model, dist = _model()
    tree = ma_sample_tree(model, dist, T=4, B=3, A=2)
    bad = ArrayDict(
        {**tree, fields.OBSERVATION: np.zeros((5, 3, 2, OBS_DIM), np.float32)}
    )
    with pytest.raises(ShapeError, match="bootstrap row"):
        flatten_agents(bad)
    with pytest.raises(TreeStructureError, match="advantage"):
        flatten_agents({k: v for k, v in tree.items() if k != fields.ADVANTAGE})
    info = {
        k: v for k, v in tree[fields.AGENT_INFO].items() if k != fields.POLICY_INDEX
    }
    with pytest.raises(TreeStructureError, match="policy_index"):
        flatten_agents({**tree, fields.AGENT_INFO: info}, policy_index=0)


def test_plain_ppo_on_a_multiagent_batch_points_to_flatten_agents():
    model, dist = _model()
    tree = ma_sample_tree(model, dist, T=4, B=3, A=2)
    with pytest.raises(ShapeError, match=r"\(4, 3, 2\).*FlattenAgents\(algo"):
        _ppo(model, dist).optimize(tree)


def test_parameter_sharing_model_samples_agents_as_a_second_leading_dim():
    """Handler example and step with [B, A, F] observations give [B, A] outputs."""
    model, dist = _model()
    handler = TorchHandler(ActorCriticAgent(model, dist), n_envs=3)
    example = handler.example_outputs(
        np.zeros((2, OBS_DIM), np.float32)
    )  # one env [A, F]
    assert example.action.shape == (2,)
    assert example.agent_info[fields.VALUE].shape == (2,)
    assert example.agent_info[fields.LOG_PROB].shape == (2,)
    observation = (
        np.random.default_rng(0).normal(size=(3, 2, OBS_DIM)).astype(np.float32)
    )
    action = np.zeros((3, 2), np.int64)
    info = {
        fields.LOG_PROB: np.zeros((3, 2), np.float32),
        fields.VALUE: np.zeros((3, 2), np.float32),
    }
    handler.step(observation, None, None, out_action=action, out_agent_info=info)
    with torch.no_grad():
        out = model(torch.from_numpy(observation))
    np.testing.assert_allclose(info[fields.VALUE], out.value.numpy(), rtol=1e-6)
    expected = dist.log_likelihood(torch.from_numpy(action), out.dist_params)
    np.testing.assert_allclose(info[fields.LOG_PROB], expected.numpy(), rtol=1e-5)


def test_per_policy_trains_each_policy_on_its_own_rows():
    (model_0, dist), (model_1, _) = _model(0), _model(1)
    tree = ma_sample_tree(model_0, dist, seed=3, n_policies=2)
    twins = copy.deepcopy(model_0), copy.deepcopy(model_1)
    algorithm = PerPolicy({0: _ppo(model_0, dist), 1: _ppo(model_1, dist)})
    metrics = algorithm.optimize(tree)
    assert {name.split("/")[0] for name in metrics} == {"policy0", "policy1"}
    for index, twin in enumerate(twins):  # the same update, alone, on its rows
        FlattenAgents(_ppo(twin, dist), index).optimize(tree)
    for model, twin in zip((model_0, model_1), twins):
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p, q)
    state = algorithm.state_dict()
    assert set(state) == {0, 1}
    algorithm.load_state_dict(state)
    with pytest.raises(CheckpointMismatchError, match="policies"):
        algorithm.load_state_dict({0: state[0]})
    with pytest.raises(ConfigError, match="policy indices"):
        PerPolicy({"learner": _ppo(model_0, dist)})
