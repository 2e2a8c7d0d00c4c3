"""Distributions against torch.distributions and a numeric change of variables."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.errors import ConfigError, ShapeError
from parllel.torch.distributions import Categorical, Gaussian, SquashedGaussian
from parllel.torch.distributions.base import DistParams, Distribution, GaussianParams

SETTINGS = settings(max_examples=30, deadline=None)


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    num_actions=st.integers(1, 6),
    leading=st.sampled_from([(), (3,), (2, 4)]),
)
def test_categorical_matches_torch(seed, num_actions, leading):
    g = _seeded(seed)
    old = DistParams(torch.randn(*leading, num_actions, generator=g) * 3)  # [..., A]
    new = DistParams(torch.randn(*leading, num_actions, generator=g) * 3)
    action = torch.randint(num_actions, leading, generator=g)
    dist = Categorical(num_actions)
    ref_old = torch.distributions.Categorical(logits=old.logits)
    ref_new = torch.distributions.Categorical(logits=new.logits)
    torch.testing.assert_close(
        dist.log_likelihood(action, old), ref_old.log_prob(action)
    )
    torch.testing.assert_close(dist.entropy(old), ref_old.entropy())
    torch.testing.assert_close(
        dist.kl(old, new), torch.distributions.kl_divergence(ref_old, ref_new)
    )
    assert dist.sample(old).shape == leading
    assert dist.deterministic(old).shape == leading


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    dim=st.integers(1, 4),
    leading=st.sampled_from([(), (3,), (2, 4)]),
)
def test_gaussian_matches_torch(seed, dim, leading):
    g = _seeded(seed)
    old = GaussianParams(
        torch.randn(*leading, dim, generator=g), torch.randn(*leading, dim, generator=g)
    )
    new = GaussianParams(
        torch.randn(*leading, dim, generator=g), torch.randn(*leading, dim, generator=g)
    )
    x = torch.randn(*leading, dim, generator=g) * 2
    dist = Gaussian(dim)

    def ref(p):
        return torch.distributions.Independent(
            torch.distributions.Normal(p.mean, p.log_std.exp()), 1
        )

    torch.testing.assert_close(dist.log_likelihood(x, old), ref(old).log_prob(x))
    torch.testing.assert_close(dist.entropy(old), ref(old).entropy())
    torch.testing.assert_close(
        dist.kl(old, new), torch.distributions.kl_divergence(ref(old), ref(new))
    )
    assert dist.sample(old).shape == (*leading, dim)


def test_gaussian_broadcast_and_clipped_log_std():
    dist = Gaussian(2, min_log_std=-1.0, max_log_std=0.5)
    params = GaussianParams(torch.zeros(5, 2), torch.tensor([-3.0, 3.0]))  # [2]
    expected = 2 * 0.5 * math.log(2 * math.pi * math.e) + (-1.0 + 0.5)
    torch.testing.assert_close(dist.entropy(params), torch.full((5,), expected))
    # the same clipped distribution in log-likelihood and KL
    clipped = GaussianParams(torch.zeros(5, 2), torch.tensor([-1.0, 0.5]))
    x = torch.randn(5, 2)
    torch.testing.assert_close(
        dist.log_likelihood(x, params), dist.log_likelihood(x, clipped)
    )
    torch.testing.assert_close(dist.kl(params, clipped), torch.zeros(5))


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_squashed_gaussian_log_prob_is_change_of_variables(seed):
    """Compare with log N(u) - log|d action / d u| computed by autograd."""
    g = _seeded(seed)
    low = np.array([-2.0, 0.0, -0.5])
    high = np.array([1.0, 4.0, 0.5])
    dist = SquashedGaussian(3, low, high)
    params = GaussianParams(
        torch.randn(3, generator=g, dtype=torch.float64),
        0.5 * torch.randn(3, generator=g, dtype=torch.float64),
    )
    u = torch.randn(3, generator=g, dtype=torch.float64) * 1.5
    # numeric Jacobian of the elementwise map u -> action, diagonal entries
    jacobian = torch.autograd.functional.jacobian(dist.squash, u)  # [3, 3]
    log_det = torch.log(torch.diagonal(jacobian)).sum()
    normal = torch.distributions.Normal(params.mean, params.log_std.exp())
    expected = normal.log_prob(u).sum() - log_det
    action = dist.squash(u)
    torch.testing.assert_close(dist.log_likelihood(action, params), expected)
    # the sampling path (from u directly) agrees too
    torch.testing.assert_close(dist._log_prob_pre_squash(u, params), expected)


def test_squashed_gaussian_bounds_and_stability():
    torch.manual_seed(0)
    dist = SquashedGaussian(2, low=[-3.0, 10.0], high=[3.0, 20.0])
    params = GaussianParams(torch.full((1000, 2), 30.0), torch.zeros(1000, 2))
    action, log_prob = dist.sample_with_log_prob(params)
    assert (action >= torch.tensor([-3.0, 10.0])).all()
    assert (action <= torch.tensor([3.0, 20.0])).all()
    assert torch.isfinite(log_prob).all()  # large u: no log(0)
    torch.testing.assert_close(
        dist.deterministic(GaussianParams(torch.zeros(2), torch.zeros(2))),
        torch.tensor([0.0, 15.0]),
    )
    # actions exactly at the bounds give finite log-likelihoods
    edge = torch.tensor([[-3.0, 20.0]])
    edge_params = GaussianParams(params.mean[:1], params.log_std[:1])
    assert torch.isfinite(dist.log_likelihood(edge, edge_params)).all()


def test_distributions_satisfy_protocol_and_validate():
    for dist in (Categorical(2), Gaussian(2), SquashedGaussian(2)):
        assert isinstance(dist, Distribution)
    with pytest.raises(ConfigError):
        Categorical(0)
    with pytest.raises(ConfigError):
        Gaussian(2, min_log_std=1.0, max_log_std=0.0)
    with pytest.raises(ConfigError):
        SquashedGaussian(2, low=1.0, high=1.0)
    with pytest.raises(ConfigError):
        SquashedGaussian(1, low=-np.inf, high=1.0)
    with pytest.raises(ShapeError):
        Categorical(3).entropy(DistParams(torch.zeros(4, 2)))


def test_categorical_sampling_frequencies_match_probabilities():
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]]).expand(40_000, 4)
    samples = Categorical(4).sample(DistParams(logits))
    frequencies = torch.bincount(samples, minlength=4).double() / samples.numel()
    expected = torch.softmax(logits[0].double(), dim=-1)
    assert torch.allclose(frequencies, expected, atol=0.01)
