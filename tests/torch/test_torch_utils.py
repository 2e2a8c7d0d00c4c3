"""numpy_to_torch_tree: zero-copy views over sample trees; device moves."""

from __future__ import annotations

import numpy as np
import torch

from parllel import fields
from parllel.arrays import Array
from parllel.torch.utils import (
    numpy_to_torch_tree,
    torch_to_numpy_tree,
    tree_index,
    tree_to_device,
)
from parllel.tree import ArrayDict


def test_numpy_to_torch_tree_is_zero_copy_over_shared_arrays():
    tree = ArrayDict(
        {
            fields.OBSERVATION: {
                "pixels": Array((4, 2), (3, 3), np.uint8, storage="shared", padding=1),
                "vector": Array((4, 2), (5,), np.float32, storage="shared", padding=1),
            },
            fields.REWARD: Array((4, 2), (), np.float32, storage="shared"),
            fields.DONE: Array((4, 2), (), np.bool_),
        }
    )
    with tree:
        torch_tree = numpy_to_torch_tree(tree)
        assert isinstance(torch_tree, ArrayDict)
        vector = torch_tree[fields.OBSERVATION]["vector"]
        assert isinstance(vector, torch.Tensor)
        assert vector.shape == (4, 2, 5)  # batch window, no padding rows
        assert torch_tree[fields.DONE].dtype == torch.bool
        # writes through the arrays are seen by the tensors and back
        tree[fields.REWARD][1, 0] = 3.0
        assert torch_tree[fields.REWARD][1, 0] == 3.0
        torch_tree[fields.OBSERVATION]["pixels"][0, 1, 2, 2] = 7
        assert tree[fields.OBSERVATION]["pixels"][0, 1, 2, 2] == 7
        # tree_index keeps nesting and indexes every leaf
        columns = tree_index(torch_tree, (slice(None), torch.tensor([1])))
        assert columns[fields.OBSERVATION]["pixels"].shape == (4, 1, 3, 3)
        del torch_tree, vector, columns


def test_plain_dicts_and_device_moves():
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": (np.zeros(2),)}
    tensors = numpy_to_torch_tree(arrays)
    assert isinstance(tensors["b"], tuple)
    moved = tree_to_device(tensors, "cpu")
    assert moved["a"] is tensors["a"]  # already there: no copy
    back = torch_to_numpy_tree(moved)
    assert np.shares_memory(back["a"], arrays["a"])
