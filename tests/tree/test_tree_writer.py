"""The one tree writer (write_nested) and its rules, and the walk helpers' options."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

from parllel.errors import ConfigError, TreeStructureError
from parllel.tree import buffer_from_example, tree_items, tree_map
from parllel.tree.nodes import mapping_children
from parllel.tree.utils import tree_to_builtin
from parllel.tree.writing import WriteRules, write_nested

Point = namedtuple("Point", ["x", "y"])


def fill(leaf, item, path):
    leaf[...] = item


def slots():
    return {"a": np.zeros(2), "t": {"0": np.zeros(2), "1": np.zeros(2)}}


def test_values_of_every_form_reach_their_leaves():
    out = slots()
    write_nested(out, {"a": 1, "t": (2, 3)}, fill)  # a tuple fills keys "0", "1"
    assert out["a"].tolist() == [1, 1] and out["t"]["1"].tolist() == [3, 3]
    point = {"x": np.zeros(1), "y": np.zeros(1)}
    write_nested(point, Point(4, 5), fill)
    assert point["y"][0] == 5
    paths = []
    write_nested(out, {"a": 0, "t": [0, 0]}, lambda leaf, item, p: paths.append(p))
    assert paths == ["a", "t.0", "t.1"]


def test_broadcast_is_a_rule():
    out = slots()
    write_nested(out, 7.0, fill)  # the default (ArrayDict's) rules broadcast
    assert all((leaf == 7).all() for _, leaf in tree_items(out))
    with pytest.raises(
        TreeStructureError, match=r"must be a dict with keys \['a', 't'\]"
    ):
        write_nested(out, 7.0, fill, WriteRules())


def test_mismatches_name_missing_and_extra_leaves():
    out = slots()
    with pytest.raises(TreeStructureError, match=r"missing leaves \['t.1'\]"):
        write_nested(out, {"a": 0, "t": (1,)}, fill)
    with pytest.raises(TreeStructureError, match=r"unknown leaves \['b'\]"):
        write_nested(out, {"a": 0, "t": (1, 2), "b": 3}, fill)
    with pytest.raises(TreeStructureError, match=r"unknown leaves \['t.2'\]"):
        # a longer tuple is refused as a longer dict is
        write_nested(out, {"a": 0, "t": (1, 2, 3)}, fill)
    lenient = WriteRules(extra_ok=True)
    write_nested(out, {"a": 0, "t": (1, 2, 3), "b": 3}, fill, lenient)
    assert out["t"]["1"].tolist() == [2, 2]


def test_the_rules_name_the_value_and_choose_the_error():
    rules = WriteRules(what="agent 'x''s observation", error=ConfigError)
    with pytest.raises(ConfigError, match="agent 'x''s observation at 't' must"):
        write_nested(slots(), {"a": 0, "t": None}, fill, rules)


def test_array_dict_refuses_a_longer_tuple():
    tree = buffer_from_example({"t": (0.0, 0.0)}, (2,))
    tree[0] = {"t": (1.0, 2.0)}
    assert tree.t["1"][0] == 2.0
    with pytest.raises(TreeStructureError, match="unknown leaves"):
        tree[0] = {"t": (1.0, 2.0, 3.0)}


def test_tree_to_builtin_gives_gymnasiums_nesting():
    tree = buffer_from_example({"a": (0, 0.0), "p": Point(0, 0)}, (3,))
    shapes = tree_to_builtin(tree, lambda leaf: leaf.shape)
    assert shapes == {"a": ((3,), (3,)), "p": {"x": (3,), "y": (3,)}}
    assert tree_to_builtin(np.zeros(2), len) == 2


def test_mapping_children_keeps_lists_and_empty_mappings_whole():
    config = {"a": [1, 2], "b": {}, "c": {"d": (3,)}}
    assert dict(tree_items(config, children_of=mapping_children)) == {
        "a": [1, 2],
        "b": {},
        "c.d": (3,),
    }
    assert dict(tree_items(config)) == {"a.0": 1, "a.1": 2, "c.d.0": 3}


def test_tree_map_is_leaf_stops_the_walk():
    data = {"act": {"ref": "Tanh"}, "sizes": [1, 2]}
    mapped = tree_map(
        lambda leaf: "X" if isinstance(leaf, dict) else leaf,
        data,
        is_leaf=lambda node: isinstance(node, dict) and set(node) == {"ref"},
    )
    assert mapped == {"act": "X", "sizes": [1, 2]}
