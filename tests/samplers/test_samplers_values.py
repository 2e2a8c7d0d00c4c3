"""Bootstrap and final-observation values: requested where needed, used by GAE."""

from __future__ import annotations

import numpy as np
import pytest

from parllel import fields
from parllel.cages import CageOptions
from parllel.transforms import EstimateAdvantage
from tests.samplers.test_samplers_alignment import (
    B,
    T,
    build,
    padded_observation,
    state_vector,
)

GAMMA, LAMBDA = 0.9, 0.8


def reference_gae(tree):
    """Python GAE; values recomputed from observations as ``10 + t``."""
    obs = padded_observation(tree)
    final = state_vector(tree.final_observation).to_ndarray()
    reward = tree.reward.to_ndarray()
    terminated, truncated = tree.terminated.to_ndarray(), tree.truncated.to_ndarray()
    value = 10.0 + obs[:, :, 2]  # [T + 1, B]
    advantage = np.zeros((T, B))
    for b in range(B):
        following = 0.0
        for t in reversed(range(T)):
            if terminated[t, b]:
                next_value, carry = 0.0, 0.0
            elif truncated[t, b]:
                next_value, carry = 10.0 + final[t, b, 2], 0.0
            else:
                next_value, carry = value[t + 1, b], 1.0
            delta = reward[t, b] + GAMMA * next_value - value[t, b]
            following = delta + GAMMA * LAMBDA * carry * following
            advantage[t, b] = following
    return advantage


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "sampler_kind,cage_kind,recurrent",
    [
        ("feedforward", "serial", False),
        ("feedforward", "process", False),
        ("recurrent", "serial", True),
        ("alternating", "process", True),
        ("alternating", "serial", False),
    ],
)
def test_truncated_episodes_bootstrap_from_final_observation_values(
    sampler_kind, cage_kind, recurrent
):
    sampler, tree, cages = build(
        sampler_kind, cage_kind, {"terminal": False}, recurrent
    )
    with tree:
        try:
            sampler.transform = EstimateAdvantage(tree, GAMMA, LAMBDA)
            truncations = 0
            for _ in range(3):
                sampler.collect_batch()
                obs = padded_observation(tree)
                final = state_vector(tree.final_observation).to_ndarray()
                truncated = tree.truncated.to_ndarray()
                final_value = tree.final_value.to_ndarray()
                # the agent's value is 10 + t only with the right recurrent state
                np.testing.assert_array_equal(
                    final_value[truncated], 10.0 + final[truncated][:, 2]
                )
                assert (final_value[~truncated] == 0).all()
                np.testing.assert_array_equal(
                    tree.bootstrap_value.to_ndarray(), 10.0 + obs[T, :, 2]
                )
                np.testing.assert_allclose(
                    tree.advantage.to_ndarray(),
                    reference_gae(tree),
                    rtol=1e-5,
                    atol=1e-5,
                )
                truncations += truncated.sum()
            assert truncations > 0
        finally:
            for cage in cages:
                cage.close()


@pytest.mark.timeout(30)
def test_truncation_as_termination_would_differ():
    """Sanity check of the test above: ignoring final values changes advantages."""
    sampler, tree, cages = build("feedforward", "serial", {"terminal": False}, False)
    with tree:
        try:
            sampler.collect_batch()
            correct = EstimateAdvantage(tree, GAMMA, LAMBDA)(
                tree
            ).advantage.to_ndarray()
            correct = correct.copy()
            wrong = EstimateAdvantage(
                tree, GAMMA, LAMBDA, truncation_as_termination=True
            )(tree).advantage.to_ndarray()
            assert not np.allclose(correct, wrong)
        finally:
            cages[0].close()


@pytest.mark.timeout(30)
def test_no_value_fields_no_value_calls():
    """Without bootstrap fields the sampler never asks the agent for values."""
    from parllel.agents import NumpyHandler, RandomAgent
    from parllel.cages import SerialCage
    from parllel.samplers import FeedForwardSampler, sample_tree_from_examples
    from tests.helpers.envs import CountingEnv

    class Counting(RandomAgent):
        calls = 0

        def value(self, *args):
            Counting.calls += 1
            return super().value(*args)

    with SerialCage(CountingEnv, 3, options=CageOptions(seed=0)) as cage:
        handler = NumpyHandler(Counting(cage.spaces.action, seed=0), 3)
        example = handler.example_outputs(cage.example[fields.OBSERVATION])
        with sample_tree_from_examples(cage.example, example, 5, 3) as tree:
            assert fields.BOOTSTRAP_VALUE not in tree
            assert fields.FINAL_OBSERVATION not in tree
            FeedForwardSampler(cage, handler, tree).collect_batch()
    assert Counting.calls == 0
