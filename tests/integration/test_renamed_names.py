"""One name per concept: the renamed names work, the old ones warn for one release.

- GAE's lambda is ``gae_lambda`` everywhere (``lambda_`` is deprecated).
- ``parllel.samplers.sample_tree_from_examples`` lays a batch out from
  examples; ``parllel.patterns.build_sample_tree`` does it from a cage and a
  handler (``parllel.samplers.build_sample_tree`` is deprecated).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.cages import SerialCage
from parllel.errors import ConfigError
from parllel.patterns import add_advantage_estimation, build_sample_tree
from parllel.samplers import sample_tree_from_examples
from parllel.transforms import EstimateAdvantage, generalized_advantage_estimation
from tests.transforms.test_transforms_objects import make_tree


def gae_batch(seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        reward=rng.normal(size=(6, 3)).astype(np.float32),
        value=rng.normal(size=(6, 3)).astype(np.float32),
        terminated=rng.random((6, 3)) < 0.2,
        truncated=rng.random((6, 3)) < 0.2,
        bootstrap_value=rng.normal(size=3).astype(np.float32),
        final_value=rng.normal(size=(6, 3)).astype(np.float32),
    )


def test_functional_gae_takes_gae_lambda_and_warns_on_lambda_():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name does not warn
        new = generalized_advantage_estimation(**gae_batch(), gamma=0.9, gae_lambda=0.8)
    with pytest.warns(DeprecationWarning, match="'lambda_'.*'gae_lambda'"):
        old = generalized_advantage_estimation(**gae_batch(), gamma=0.9, lambda_=0.8)
    np.testing.assert_array_equal(new[0], old[0])
    np.testing.assert_array_equal(new[1], old[1])


def test_functional_gae_refuses_both_names_and_neither():
    with pytest.raises(ConfigError, match="both 'gae_lambda' and .*'lambda_'"):
        generalized_advantage_estimation(
            **gae_batch(), gamma=0.9, gae_lambda=0.8, lambda_=0.8
        )
    with pytest.raises(TypeError, match="missing required argument: 'gae_lambda'"):
        generalized_advantage_estimation(**gae_batch(), gamma=0.9)


def test_gae_lambda_range_error_names_gae_lambda():
    with pytest.raises(ConfigError, match="gae_lambda must be in"):
        generalized_advantage_estimation(**gae_batch(), gamma=0.9, gae_lambda=1.5)


def test_estimate_advantage_takes_gae_lambda_and_warns_on_lambda_():
    tree_new, tree_old = make_tree(seed=3), make_tree(seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gae = EstimateAdvantage(tree_new, gamma=0.9, gae_lambda=0.7)
        positional = EstimateAdvantage(make_tree(), 0.9, 0.7)
    assert gae.gae_lambda == positional.gae_lambda == 0.7
    with pytest.warns(DeprecationWarning, match="EstimateAdvantage"):
        old = EstimateAdvantage(tree_old, gamma=0.9, lambda_=0.7)
    assert old.gae_lambda == 0.7
    np.testing.assert_array_equal(
        tree_new.advantage.to_ndarray(), tree_old.advantage.to_ndarray()
    )
    with pytest.raises(ConfigError, match="both"):
        EstimateAdvantage(make_tree(), gamma=0.9, gae_lambda=0.7, lambda_=0.7)
    with pytest.raises(TypeError, match="'gae_lambda'"):
        EstimateAdvantage(make_tree(), gamma=0.9)


def test_add_advantage_estimation_uses_gae_lambda():
    (gae,) = add_advantage_estimation(make_tree(), gamma=0.9, gae_lambda=0.6)
    assert gae.gae_lambda == 0.6


def test_sample_tree_from_examples_and_deprecated_samplers_name():
    import parllel.samplers as samplers

    with pytest.warns(DeprecationWarning, match="sample_tree_from_examples"):
        old = samplers.build_sample_tree
    assert old is sample_tree_from_examples
    with pytest.warns(DeprecationWarning):
        from parllel.samplers import build_sample_tree as imported
    assert imported is sample_tree_from_examples
    assert "build_sample_tree" not in samplers.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        samplers.no_such_name  # noqa: B018


def test_patterns_build_sample_tree_matches_sample_tree_from_examples():
    cage = SerialCage(lambda: __import__("gymnasium").make("CartPole-v1"), 3, seed=0)
    with cage:
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), n_envs=3)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        with (
            build_sample_tree(cage, handler, 5) as from_cage,
            sample_tree_from_examples(cage.example, example, 5, 3, "local") as direct,
        ):
            assert (
                dict(from_cage.items_flat()).keys() == dict(direct.items_flat()).keys()
            )
            for (path, a), (_, b) in zip(
                from_cage.items_flat(), direct.items_flat(), strict=True
            ):
                assert a.shape == b.shape and a.dtype == b.dtype, path
