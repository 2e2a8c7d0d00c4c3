"""ArrayDict and buffer_from_example: writes equal per-leaf writes; errors name leaves."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from collections import namedtuple

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.errors import DtypeError, ShapeError, TreeStructureError
from parllel.tree import ArrayDict, buffer_from_example, tree_items, tree_map

Point = namedtuple("Point", ["x", "y"])


def example_step():
    return {
        "observation": {"pos": np.zeros(3, np.float32), "id": np.int64(0)},
        "reward": np.float32(0.0),
        "terminated": False,
        "truncated": False,
        "action": np.int64(0),
    }


@settings(max_examples=60, deadline=None)
@given(
    t=st.integers(0, 4),
    b=st.integers(0, 2),
    seed=st.integers(0, 2**16),
    storage=st.sampled_from(["local", "shared"]),
    flat=st.booleans(),
)
def test_tree_write_equals_per_leaf_writes(t, b, seed, storage, flat):
    rng = np.random.default_rng(seed)
    example = example_step()
    if flat:
        example["observation"] = np.zeros(3, np.float32)
    with buffer_from_example(example, (5, 3), storage=storage) as tree:
        reference = {
            path: np.zeros(leaf.shape, leaf.dtype) for path, leaf in tree.items_flat()
        }
        value = tree_map(
            lambda leaf: (rng.normal(size=np.shape(leaf)) * 10).astype(
                np.asarray(leaf).dtype
            ),
            example,
        )
        tree[t, b] = value
        for path, leaf_value in tree_items(value):
            reference[path][t, b] = leaf_value
        for path, leaf in tree.items_flat():
            np.testing.assert_array_equal(
                leaf.to_ndarray(), reference[path], err_msg=path
            )
        # a non-fast index expression through the general path
        tree[t] = 0
        for path, leaf in tree.items_flat():
            assert not leaf[t].any(), path


def test_reading_indexes_every_leaf():
    tree = buffer_from_example(example_step(), (4, 2))
    tree[1, 1] = {**example_step(), "reward": np.float32(2.0)}
    step = tree[1, 1]
    assert isinstance(step, ArrayDict)
    assert step.reward == 2.0
    assert step["observation"].pos.shape == (3,)
    assert tree[:, 0].reward.shape == (4,)


def test_attribute_access_does_not_forward():
    tree = buffer_from_example(example_step(), (4, 2))
    with pytest.raises(AttributeError, match="fields"):
        tree.rewards  # noqa: B018 (typo on purpose)
    with pytest.raises(AttributeError, match="subscription"):
        tree.reward = 3


def test_namedtuple_and_tuple_examples():
    tree = buffer_from_example(
        {"p": Point(np.float32(0), np.float32(0)), "t": (0, 1.0)}, (3,)
    )
    assert list(tree.p) == ["x", "y"]
    tree[1] = {"p": Point(np.float32(1), np.float32(2)), "t": (5, 2.5)}
    assert tree.p.y[1] == 2 and tree.t["0"][1] == 5 and tree.t["1"][1] == 2.5


def test_gymnasium_space_samples_allocate():
    space = gym.spaces.Dict(
        {
            "image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "vector": gym.spaces.Box(-1, 1, (2,), np.float32),
            "pair": gym.spaces.Tuple(
                (gym.spaces.Discrete(3), gym.spaces.MultiBinary(4))
            ),
        }
    )
    tree = buffer_from_example(space.sample(), (4, 2))
    assert tree.image.shape == (4, 2, 8, 8, 3) and tree.image.dtype == np.uint8
    assert tree.pair["1"].dtype == np.int8
    tree[0, 1] = space.sample()


@pytest.mark.parametrize(
    "value, error, match",
    [
        (None, TreeStructureError, "None"),
        ({"reward": 1.0}, TreeStructureError, "missing leaves"),
        ({**example_step(), "extra": 1}, TreeStructureError, "unknown leaves"),
        ({**example_step(), "reward": None}, TreeStructureError, "reward"),
        (
            {
                **example_step(),
                "observation": {"pos": np.zeros(4, np.float32), "id": 0},
            },
            ShapeError,
            "observation.pos",
        ),
        (
            {
                **example_step(),
                "observation": {"pos": np.zeros(3, np.float32), "id": 1.5},
            },
            DtypeError,
            "observation.id",
        ),
        ({**example_step(), "action": np.float64(1.0)}, DtypeError, "action"),
    ],
)
def test_bad_writes_name_the_leaf(value, error, match):
    tree = buffer_from_example(example_step(), (4, 2))
    with pytest.raises(error, match=match):
        tree[0, 0] = value


def test_example_with_none_or_objects_fails():
    with pytest.raises(TreeStructureError, match="a.b"):
        buffer_from_example({"a": {"b": None}}, (2,))
    with pytest.raises(TreeStructureError, match="not numeric"):
        buffer_from_example({"a": "text"}, (2,))


def test_repr_is_readable():
    text = repr(buffer_from_example(example_step(), (4, 2)))
    assert (
        "'observation': ArrayDict({" in text and "'reward': Array(shape=(4, 2)" in text
    )


def _child_write(tree):
    tree[1, 0] = {"x": np.float32(3.0), "y": np.ones(2, np.int16)}


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_shared_tree_written_in_child_is_visible(method):
    example = {"x": np.float32(0), "y": np.zeros(2, np.int16)}
    with buffer_from_example(example, (3, 2), storage="shared") as tree:
        assert len(pickle.dumps(tree)) < 4096
        ctx = mp.get_context(method)
        proc = ctx.Process(target=_child_write, args=(tree,))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert tree.x[1, 0] == 3.0
        np.testing.assert_array_equal(tree.y[1, 0], [1, 1])


def _child_crash(tree):
    tree[0, 0] = {"x": np.float32(1.0)}
    import os

    os._exit(3)


def test_crashing_child_leaves_no_segment():
    with buffer_from_example({"x": np.float32(0)}, (3, 2), storage="shared") as tree:
        proc = mp.get_context("spawn").Process(target=_child_crash, args=(tree,))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 3
        assert tree.x[0, 0] == 1.0
    # the autouse fixture checks that nothing is left in /dev/shm


def test_plain_ndarray_leaves_are_supported():
    tree = ArrayDict({"a": np.zeros((3, 2)), "b": Array((3, 2))})
    tree[1, 1] = {"a": 2.0, "b": 3.0}
    assert tree.a[1, 1] == 2.0 and tree.b[1, 1] == 3.0
    with pytest.raises(ShapeError, match="'a'"):
        tree[1] = {"a": np.zeros(5), "b": 0.0}
