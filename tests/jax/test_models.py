"""The flax models match the torch builders' outputs with converted weights."""

from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parllel.jax.distributions import (
    Categorical,
    DistParams,
    Gaussian,
    GaussianParams,
    SquashedGaussian,
)
from parllel.jax.models import build_actor_critic
from parllel.jax.models.params import init_params, params_from_torch, params_to_torch

torch = pytest.importorskip("torch")
torch_models = pytest.importorskip("parllel.torch.models")
torch_distributions = pytest.importorskip("parllel.torch.distributions")
torch_dist_base = pytest.importorskip("parllel.torch.distributions.base")

pytestmark = pytest.mark.usefixtures("shared_compilations")

BOX4 = gym.spaces.Box(-1.0, 1.0, (4,))
CASES = [
    (BOX4, gym.spaces.Discrete(2), {}),
    (BOX4, gym.spaces.Box(-2.0, 2.0, (3,)), dict(shared_trunk=False)),
    (BOX4, gym.spaces.Box(-2.0, 2.0, (3,)), dict(orthogonal_init=True)),
    (
        gym.spaces.Box(0, 255, (2, 20, 20), np.uint8),
        gym.spaces.Discrete(3),
        dict(cnn=dict(channels=(4, 8), kernel_sizes=(4, 3), strides=(2, 1))),
    ),
    (
        gym.spaces.Box(0, 255, (20, 20, 2), np.uint8),
        gym.spaces.Discrete(3),
        dict(cnn=dict(channels=(4,), kernel_sizes=(4,), strides=(2,), output_size=16)),
    ),
]


def _torch_state(model):
    return {k: v.numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("obs_space, action_space, kwargs", CASES)
def test_converted_weights_give_torch_outputs(obs_space, action_space, kwargs):
    torch.manual_seed(0)
    torch_model, _ = torch_models.build_actor_critic(obs_space, action_space, **kwargs)
    network, _ = build_actor_critic(obs_space, action_space, **kwargs)
    obs_space.seed(0)
    observation = np.stack([obs_space.sample() for _ in range(3)])
    own = init_params(network, observation, jax.random.key(0))
    params = params_from_torch(_torch_state(torch_model))
    assert jax.tree.structure(params) == jax.tree.structure(own)
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(jnp.shape, own)
    out = network.apply({"params": params}, observation)
    with torch.no_grad():
        expected = torch_model(torch.as_tensor(observation))
    np.testing.assert_allclose(out.value, expected.value.numpy(), atol=1e-5)
    for got, want in zip(out.dist_params, expected.dist_params):
        np.testing.assert_allclose(got, want.detach().numpy(), atol=1e-5)
    back = params_to_torch(params)
    assert back.keys() == _torch_state(torch_model).keys()
    for name, value in _torch_state(torch_model).items():
        np.testing.assert_array_equal(back[name], value)


def test_orthogonal_heads_and_state_independent_log_std():
    network, _ = build_actor_critic(
        BOX4, gym.spaces.Box(-1, 1, (2,)), init_log_std=-0.5
    )
    params = init_params(network, np.zeros((1, 4), np.float32), jax.random.key(1))
    kernel = np.asarray(params["value_head"]["linear"]["kernel"])  # [64, 1], gain 1
    np.testing.assert_allclose(np.linalg.norm(kernel), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(params["policy_head"]["log_std"], [-0.5, -0.5])
    bound = 1 / np.sqrt(4)  # torch's default init of the first trunk layer
    assert np.abs(params["trunk"]["layers_0"]["kernel"]).max() <= bound


def test_distributions_match_torch():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 3)).astype(np.float32)
    mean = rng.normal(size=(5, 2)).astype(np.float32)
    log_std = rng.normal(size=(2,)).astype(np.float32) * 0.3
    action = np.array([0, 2, 1, 1, 0])
    continuous = np.tanh(rng.normal(size=(5, 2))).astype(np.float32) * 1.5
    pairs = [
        (Categorical(3), torch_distributions.Categorical(3), (logits,), action),
        (Gaussian(2), torch_distributions.Gaussian(2), (mean, log_std), continuous),
        (
            SquashedGaussian(2, -2.0, 2.0),
            torch_distributions.SquashedGaussian(2, -2.0, 2.0),
            (mean, log_std),
            continuous,
        ),
    ]
    for ours, theirs, arrays, x in pairs:
        j_params = (DistParams if len(arrays) == 1 else GaussianParams)(*arrays)
        t_param = (
            torch_dist_base.DistParams
            if len(arrays) == 1
            else torch_dist_base.GaussianParams
        )(*(torch.as_tensor(a) for a in arrays))
        for method in ("entropy", "deterministic"):
            np.testing.assert_allclose(
                getattr(ours, method)(j_params),
                getattr(theirs, method)(t_param).detach().numpy(),
                rtol=1e-5,
                atol=1e-6,
            )
        np.testing.assert_allclose(
            ours.log_likelihood(jnp.asarray(x), j_params),
            theirs.log_likelihood(torch.as_tensor(x), t_param).numpy(),
            rtol=1e-5,
            atol=1e-5,
        )
        sample = ours.sample(j_params, jax.random.key(0))
        assert sample.shape == theirs.sample(t_param).shape


def test_squashed_sample_with_log_prob_is_within_bounds():
    dist = SquashedGaussian(2, [-1.0, 0.0], [1.0, 4.0])
    params = GaussianParams(jnp.zeros((100, 2)), jnp.zeros(2))
    action, log_prob = dist.sample_with_log_prob(params, jax.random.key(3))
    assert (action[:, 0] >= -1).all() and (action[:, 1] <= 4).all()
    np.testing.assert_allclose(
        log_prob, dist.log_likelihood(action, params), rtol=1e-3, atol=1e-3
    )
