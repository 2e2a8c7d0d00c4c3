"""A closed sample tree is refused the same way with serial and process cages."""

from __future__ import annotations

import functools

import gymnasium as gym
import pytest

from parllel.agents import NumpyHandler, RandomAgent
from parllel.builders import build_sample_tree
from parllel.cages import CageOptions, build_cage
from parllel.errors import ArrayClosedError
from parllel.samplers import FeedForwardSampler

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("parallel", ["serial", "process"])
def test_a_closed_sample_tree_is_refused_whatever_the_cage(parallel):
    cage = build_cage(
        functools.partial(gym.make, "CartPole-v1"),
        2,
        parallel=parallel,
        options=CageOptions(seed=0),
    )
    try:
        handler = NumpyHandler(RandomAgent(cage.spaces.action, seed=0), 2)
        tree = build_sample_tree(cage, handler, 4)
        sampler = FeedForwardSampler(cage, handler, tree)
        sampler.collect_batch()
        tree.close()
        with pytest.raises(ArrayClosedError, match="cannot rotate leaf 'observation'"):
            sampler.collect_batch()
        with pytest.raises(ArrayClosedError, match="the Array was closed"):
            tree["reward"][0] = 1.0
    finally:
        cage.close()
