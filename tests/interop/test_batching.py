"""Batching between gymnasium's batched values and slot trees, over any nested space."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space, iterate
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.errors import InvalidActionError
from parllel.interop.batching import (
    allocate_for_space,
    batch_copy,
    batch_view,
    single_value,
    write_batch,
)
from tests.cages.test_cage_spaces import spaces_strategy
from tests.helpers.interop_envs import assert_same


@settings(max_examples=60, deadline=None)
@given(space=spaces_strategy, n_envs=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_write_then_read_gives_gymnasiums_batch_back(space, n_envs, seed):
    batched = batch_space(space, n_envs)
    batched.seed(seed)
    value = batched.sample()
    tree = allocate_for_space(space, n_envs, "local")
    write_batch(tree, value)
    assert_same(value, batch_copy(tree))
    assert_same(value, batch_view(tree))
    # env i's value, as gymnasium's iterate() splits the batch
    for i, expected in enumerate(iterate(batched, value)):
        assert_same(expected, single_value(tree, i), f"env {i}")


def test_views_share_memory_and_copies_do_not():
    space = gym.spaces.Dict(
        {"a": gym.spaces.Box(0, 1, (2,)), "b": gym.spaces.Discrete(3)}
    )
    tree = allocate_for_space(space, 2, "local")
    view, copy = batch_view(tree), batch_copy(tree)
    write_batch(tree, {"a": np.ones((2, 2), np.float32), "b": np.array([1, 2])})
    assert view["b"].tolist() == [1, 2] and copy["b"].tolist() == [0, 0]


@pytest.mark.parametrize(
    "value, match",
    [
        ({"a": np.zeros((2, 2), np.float32)}, r"keys \['a', 'b'\]"),
        (
            {"a": np.zeros((3, 2), np.float32), "b": np.zeros(2, int)},
            r"'a' have shape",
        ),
        (
            {"a": np.zeros((2, 2), np.float32), "b": np.zeros(2)},
            r"'b' have dtype float64",
        ),
        ([np.zeros(2)], "must be a dict"),
    ],
)
def test_bad_batches_name_the_leaf(value, match):
    space = gym.spaces.Dict(
        {"a": gym.spaces.Box(0, 1, (2,)), "b": gym.spaces.Discrete(3)}
    )
    with pytest.raises(InvalidActionError, match=match):
        write_batch(allocate_for_space(space, 2, "local"), value)


def test_allocation_honours_registered_zero_examples():
    # Interval registers zero_example (a pair of float32 scalars); the interop
    # allocation once walked Dict/Tuple itself and refused such a space
    from tests.helpers.space_envs import Interval

    tree = allocate_for_space(gym.spaces.Dict({"i": Interval(0.0, 1.0)}), 3, "local")
    assert tree["i"]["0"].shape == (3,) and tree["i"]["0"].dtype == np.float32
    assert tree["i"]["1"].shape == (3,)
