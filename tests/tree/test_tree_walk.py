"""ArrayDict's walking API (items_flat, map, batch_shape, ==) against plain references.

Random nested trees are described by a plain nested dict of leaf specs; the
references below walk that dict by hand, and the tree must agree.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parllel.arrays import Array
from parllel.errors import ArrayClosedError, ShapeError, TreeStructureError
from parllel.tree import ArrayDict, buffer_from_example, tree_items, tree_map

KEYS = st.sampled_from(["a", "b", "obs", "x.y", "0", "reward"])
BATCH_SHAPES = st.sampled_from([(3,), (3, 2), (2, 2)])
LEAF = st.tuples(
    st.sampled_from(["array", "ndarray"]),
    BATCH_SHAPES,
    st.sampled_from([(), (2,), (1, 3)]),
    st.sampled_from([np.float32, np.int64, np.bool_]),
)
SPECS = st.recursive(
    LEAF,
    lambda inner: st.dictionaries(KEYS, inner, min_size=1, max_size=3),
    max_leaves=6,
)


def build(spec, rng):
    """``(tree node, plain reference node)`` for a spec: ArrayDict and dict of ndarrays."""
    if isinstance(spec, dict):
        pairs = {key: build(value, rng) for key, value in spec.items()}
        tree = ArrayDict({key: pair[0] for key, pair in pairs.items()})
        return tree, {key: pair[1] for key, pair in pairs.items()}
    kind, batch_shape, feature_shape, dtype = spec
    values = (rng.normal(size=batch_shape + feature_shape) * 5).astype(dtype)
    if kind == "ndarray":
        return values, values
    leaf = Array(batch_shape, feature_shape, dtype)
    leaf.to_ndarray()[...] = values
    return leaf, values


def tree_strategy():
    return st.tuples(
        st.dictionaries(KEYS, SPECS, min_size=1, max_size=4), st.integers(0, 2**16)
    ).map(lambda args: build(args[0], np.random.default_rng(args[1])))


def reference_items(node, prefix=()):
    """Hand-written depth-first walk of a plain nested dict."""
    for key, value in node.items():
        if isinstance(value, dict):
            yield from reference_items(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def reference_equal(a, b):
    """Plain reference of Mapping equality with whole-array leaves."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(reference_equal(a[k], b[k]) for k in a)
        )
    return np.shape(a) == np.shape(b) and bool(np.all(np.asarray(a) == np.asarray(b)))


def reference_batch_shape(tree_node):
    shapes = {
        leaf.batch_shape if isinstance(leaf, Array) else None
        for _, leaf in reference_items(as_plain(tree_node))
    }
    return shapes.pop() if len(shapes) == 1 else None


def as_plain(tree):
    """The nested dict of an ArrayDict, leaves kept (for the references)."""
    return {
        key: as_plain(value) if isinstance(value, ArrayDict) else value
        for key, value in tree.items()
    }


@settings(max_examples=80, deadline=None)
@given(pair=tree_strategy())
def test_items_flat_walks_like_the_reference(pair):
    tree, plain = pair
    expected = list(reference_items(plain))
    walked = list(tree.items_flat(tuple_paths=True))
    assert [path for path, _ in walked] == [path for path, _ in expected]
    for (path, leaf), (_, value) in zip(walked, expected):
        np.testing.assert_array_equal(np.asarray(leaf), value, err_msg=str(path))
    dotted = [path for path, _ in tree.items_flat()]
    assert dotted == [".".join(path) for path, _ in expected]
    assert [p for p, _ in tree.items_flat("root")] == ["root." + p for p in dotted]
    assert [p for p, _ in tree.items_flat(("r",), tuple_paths=True)] == [
        ("r",) + path for path, _ in expected
    ]
    # the generic walker agrees on ArrayDicts
    assert [p for p, _ in tree_items(tree)] == dotted


@settings(max_examples=80, deadline=None)
@given(pair=tree_strategy(), offset=st.integers(-3, 3))
def test_map_matches_the_reference(pair, offset):
    tree, plain = pair
    doubled = tree.map(lambda leaf: np.asarray(leaf) * 2)
    assert isinstance(doubled, ArrayDict)
    assert [p for p, _ in doubled.items_flat()] == [p for p, _ in tree.items_flat()]
    for (path, leaf), (_, value) in zip(
        doubled.items_flat(tuple_paths=True), reference_items(plain)
    ):
        np.testing.assert_array_equal(leaf, value * 2, err_msg=str(path))
    # others: a plain dict and an ArrayDict, matched by key
    shifted = tree.map(
        lambda leaf, a, b: np.asarray(leaf) + a + b,
        tree_map(lambda _: offset, plain),
        tree,
    )
    for (path, leaf), (_, value) in zip(
        shifted.items_flat(tuple_paths=True), reference_items(plain)
    ):
        np.testing.assert_array_equal(leaf, value + offset + value, err_msg=str(path))
    assert tree_map(lambda leaf: leaf, tree) == tree


@settings(max_examples=80, deadline=None)
@given(pair=tree_strategy())
def test_batch_shape_matches_the_reference(pair):
    tree, _ = pair
    assert tree.batch_shape == reference_batch_shape(tree)


@settings(max_examples=60, deadline=None)
@given(
    pair=tree_strategy(),
    change=st.sampled_from(["none", "value", "drop", "add", "shape", "to_subtree"]),
    which=st.integers(0, 100),
)
def test_equality_is_mapping_equality(pair, change, which):
    tree, plain = pair
    other = tree_map(np.copy, plain)  # equal contents, other objects
    paths = [path for path, _ in reference_items(other)]
    path = paths[which % len(paths)]
    node = other
    for key in path[:-1]:
        node = node[key]
    leaf = node[path[-1]]
    if change == "value":
        node[path[-1]] = leaf + 1 if leaf.dtype != np.bool_ else ~leaf
    elif change == "drop":
        del node[path[-1]]
    elif change == "add":
        node["new"] = np.zeros(1)
    elif change == "shape":
        node[path[-1]] = np.concatenate([leaf.ravel(), leaf.ravel()[:1]])
    elif change == "to_subtree":
        node[path[-1]] = {"inner": leaf}
    expected = reference_equal(plain, other)
    if change == "none":
        assert expected
    assert (tree == other) is expected
    assert (other == tree) is expected  # dict.__eq__ defers to ArrayDict
    assert (tree != other) is (not expected)
    assert (tree == ArrayDict(other)) is expected
    assert (ArrayDict(other) == tree) is expected
    assert tree == tree.map(np.copy)


def test_equality_edge_cases():
    tree = ArrayDict({"a": np.array([np.nan]), "b": {"c": np.zeros(2)}})
    assert tree == tree  # the same object
    assert tree == ArrayDict({"a": tree.a, "b": {"c": np.zeros(2)}})  # same leaf
    assert tree != tree.map(np.copy)  # NaN differs from a copy of itself
    assert ArrayDict({"x": np.zeros(2)}) == ArrayDict({"x": np.zeros(2, np.int8)})
    assert ArrayDict({"x": np.zeros(2)}) != ("x",)  # not a Mapping
    assert ArrayDict({"0": np.zeros(1)}, sequence=True) == {"0": np.zeros(1)}
    with pytest.raises(TypeError, match="unhashable"):
        hash(tree)


def test_map_keeps_sequences_and_names_mismatches():
    Point = namedtuple("Point", ["x", "y"])
    tree = buffer_from_example({"p": Point(0.0, 0.0), "t": (0, 1.0)}, (2,))
    mapped = tree.map(
        lambda leaf, other: leaf.to_ndarray() + other,
        {"p": Point(1.0, 2.0), "t": (3, 4.0)},
    )
    assert mapped.t.is_sequence and not mapped.p.is_sequence
    assert mapped.p.y.tolist() == [2.0, 2.0] and mapped.t["0"].tolist() == [3, 3]
    with pytest.raises(TreeStructureError, match="'t.1'"):
        tree.map(lambda leaf, other: leaf, {"p": Point(1.0, 2.0), "t": (3,)})
    with pytest.raises(TreeStructureError, match="'p.x'"):
        tree.map(lambda leaf: None)
    as_subtree = tree.map(lambda leaf: {"window": leaf.to_ndarray()})
    assert as_subtree.p.x.window.shape == (2,)


def test_batch_shape_cases():
    assert ArrayDict().batch_shape is None
    tree = ArrayDict({"a": Array((4, 2), (3,)), "b": {"c": Array((4, 2), padding=1)}})
    assert tree.batch_shape == (4, 2)
    assert tree[0].batch_shape is None  # numpy views carry no batch shape
    tree["d"] = Array((4, 3))
    assert tree.batch_shape is None


def test_array_write_names_the_leaf_and_shares_translations():
    shared = Array((4, 2), (3,), storage="shared")
    cache: dict = {}
    shared.write((slice(1, 3), 0), np.ones(3, np.float32), "obs.pos", cache)
    assert len(cache) == 1 and shared[1:3, 0].sum() == 6
    shared.write(-1, 2.0, "obs.pos")  # numpy's last row
    assert (shared[3] == 2.0).all()
    shared.close()
    with pytest.raises(ArrayClosedError, match="obs.pos"):
        shared.write((0, 0), np.zeros(3, np.float32), "obs.pos")


@settings(max_examples=40, deadline=None)
@given(pair=tree_strategy())
def test_to_dict_is_the_plain_nesting(pair):
    tree, _ = pair
    plain = tree.to_dict()
    assert type(plain) is dict and plain == as_plain(tree)
    assert all(type(v) is not ArrayDict for _, v in reference_items(plain))
    assert [p for p, _ in reference_items(plain)] == [
        p for p, _ in tree.items_flat(tuple_paths=True)
    ]
    assert tree == plain and list(tree.keys()) == list(plain)
    assert list(tree.values()) == list(tree.values())
    assert dict(tree.items()).keys() == plain.keys()


def test_tree_write_names_paths_below_a_prefix():
    tree = buffer_from_example({"pos": np.zeros(3, np.float32)}, (4, 2))
    tree.write((1, 0), {"pos": np.ones(3, np.float32)}, "observation")
    assert tree.pos[1, 0].tolist() == [1, 1, 1]
    with pytest.raises(TreeStructureError, match=r"observation\.pos"):
        tree.write((1, 0), {}, "observation")
    with pytest.raises(ShapeError, match=r"observation\.pos"):
        tree.write(slice(None), {"pos": np.ones(4, np.float32)}, "observation")
