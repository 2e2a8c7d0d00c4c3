"""legal_sample: random probe actions respect an observation's action_mask."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.cages.spaces import legal_sample


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 9), st.integers(1, 4))
def test_stacked_masks_are_honoured_row_by_row(seed, n, agents):
    rng = np.random.default_rng(seed)
    mask = rng.random((agents, n)) < 0.4
    mask[rng.random(agents) < 0.3] = False  # agents that may not act
    space = gym.spaces.MultiDiscrete([n] * agents, seed=seed)
    for _ in range(20):
        action = legal_sample(space, {"action_mask": mask.astype(np.int8)})
        assert space.contains(action)
        for row, a in zip(mask, action):
            assert not row.any() or row[a]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 9))
def test_discrete_masks_are_honoured(seed, n):
    mask = np.random.default_rng(seed).random(n) < 0.5
    space = gym.spaces.Discrete(n, seed=seed)
    for _ in range(20):
        action = legal_sample(space, {"action_mask": mask.astype(np.int8)})
        assert space.contains(action) and (not mask.any() or mask[action])


def test_observations_without_a_mask_sample_the_space():
    space = gym.spaces.Box(-1, 1, (3,), np.float32, seed=0)
    assert space.contains(legal_sample(space, np.zeros(3, np.float32)))
    assert space.contains(legal_sample(space, {"state": np.zeros(3)}))
