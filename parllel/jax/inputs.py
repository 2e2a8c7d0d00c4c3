"""Sample-tree slots as arguments of jitted functions."""

from __future__ import annotations

from typing import Any

from parllel.arrays import Array
from parllel.tree.utils import tree_to_builtin

__all__ = ["jax_input"]


def jax_input(tree: Any) -> Any:
    """A sample-tree slot (ndarray, Array or tree of them) as a jit argument:
    numpy leaves in plain dicts and tuples (no copy here)."""
    if tree is None:
        return None
    return tree_to_builtin(
        tree, lambda leaf: leaf.to_ndarray() if isinstance(leaf, Array) else leaf
    )
