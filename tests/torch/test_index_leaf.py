"""``index_leaf`` equals plain indexing for every index kind PPO's minibatches use."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.torch.utils import index_leaf, tree_index


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 12),
    feature=st.sampled_from([(), (3,), (2, 5, 5)]),
    dtype=st.sampled_from([torch.uint8, torch.float32, torch.int64]),
    picks=st.lists(st.integers(0, 1000), min_size=0, max_size=20),
    index_dtype=st.sampled_from([torch.int64, torch.int32]),
)
def test_integer_tensor_index_equals_plain_indexing(
    rows: int, feature: tuple, dtype: torch.dtype, picks: list, index_dtype: torch.dtype
) -> None:
    leaf = torch.from_numpy(
        np.random.default_rng(rows).integers(0, 200, (rows, *feature))
    ).to(dtype)
    index = torch.tensor([p % rows for p in picks], dtype=index_dtype)
    got = index_leaf(leaf, index)
    assert got.dtype == leaf.dtype and torch.equal(got, leaf[index.long()])


def test_other_indices_fall_back_to_plain_indexing() -> None:
    leaf = torch.arange(24).reshape(4, 6)
    mask = torch.tensor([True, False, True, False])
    assert torch.equal(index_leaf(leaf, mask), leaf[mask])
    columns = (slice(None), torch.tensor([0, 2]))
    assert torch.equal(index_leaf(leaf, columns), leaf[columns])
    assert torch.equal(index_leaf(leaf, 2), leaf[2])
    tree = {"a": leaf, "b": None}
    out = tree_index(tree, torch.tensor([3, 1]))
    assert torch.equal(out["a"], leaf[[3, 1]]) and out["b"] is None
