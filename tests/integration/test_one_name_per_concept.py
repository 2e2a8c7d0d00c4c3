"""One name per concept.

- GAE's lambda is ``gae_lambda`` everywhere, a required argument.
- ``parllel.samplers.sample_tree_from_examples`` lays a batch out from
  examples; ``parllel.builders.build_sample_tree`` does it from a cage and a
  handler.
"""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import add_advantage_estimation, build_sample_tree
from parllel.cages import CageOptions, SerialCage
from parllel.errors import ConfigError
from parllel.samplers import sample_tree_from_examples
from parllel.transforms import EstimateAdvantage
from parllel.transforms.functional import generalized_advantage_estimation
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


def test_gae_lambda_range_error_names_gae_lambda():
    with pytest.raises(ConfigError, match="gae_lambda must be in"):
        generalized_advantage_estimation(**gae_batch(), gamma=0.9, gae_lambda=1.5)


def test_gae_lambda_is_required_and_the_old_name_is_gone():
    with pytest.raises(TypeError, match="gae_lambda"):
        generalized_advantage_estimation(**gae_batch(), gamma=0.9)
    with pytest.raises(TypeError, match="lambda_"):
        generalized_advantage_estimation(
            **gae_batch(), gamma=0.9, gae_lambda=0.8, lambda_=0.8
        )
    with pytest.raises(TypeError, match="gae_lambda"):
        EstimateAdvantage(make_tree(), gamma=0.9)
    positional = EstimateAdvantage(make_tree(), 0.9, 0.7)
    assert positional.gae_lambda == 0.7


def test_add_advantage_estimation_uses_gae_lambda():
    (gae,) = add_advantage_estimation(make_tree(), gamma=0.9, gae_lambda=0.6)
    assert gae.gae_lambda == 0.6


def test_patterns_build_sample_tree_matches_sample_tree_from_examples():
    cage = SerialCage(
        lambda: __import__("gymnasium").make("CartPole-v1"),
        3,
        options=CageOptions(seed=0),
    )
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
