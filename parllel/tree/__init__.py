"""Nested trees of arrays: allocation from examples, indexing, utilities."""

from parllel.tree.array_dict import ArrayDict
from parllel.tree.build import buffer_from_example
from parllel.tree.utils import tree_items, tree_map

__all__ = [
    "ArrayDict",
    "buffer_from_example",
    "tree_items",
    "tree_map",
]
