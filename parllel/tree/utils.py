"""Functions over nested trees: dicts, ArrayDicts, namedtuples and tuples."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.tree.array_dict import ArrayDict
from parllel.tree.nodes import children, is_namedtuple, tree_get

__all__ = [
    "is_namedtuple",
    "leaf_like",
    "tree_close",
    "tree_get",
    "tree_items",
    "tree_map",
    "tree_to_ndarray",
]


def tree_map(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """Apply ``fn`` to every leaf of ``tree`` (and the matching leaves of ``others``).

    Containers (ArrayDict, dict, namedtuple, tuple, list) keep their type;
    everything else is a leaf. An ArrayDict is walked by
    :meth:`ArrayDict.map <parllel.tree.ArrayDict.map>` (its leaves are the
    values that are not ArrayDicts); other containers by the same rule, for
    the trees that are not ArrayDicts (an agent's state tuple, a step dict).

    Example:
        >>> tree_map(lambda a, b: a + b, {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)})
        {'x': 11, 'y': (22, 33)}
    """
    if isinstance(tree, ArrayDict):
        return tree.map(fn, *others)
    if isinstance(tree, Mapping):
        mapping_type: Callable[..., Any] = type(tree)  # dict-like: built from a dict
        return mapping_type(
            {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
        )
    if is_namedtuple(tree):
        return type(tree)(*(tree_map(fn, *items) for items in zip(tree, *others)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, *items) for items in zip(tree, *others))
    return fn(tree, *others)


def tree_items(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf, depth-first, paths joined by dots.

    An ArrayDict is walked by :meth:`ArrayDict.items_flat
    <parllel.tree.ArrayDict.items_flat>`; a bare leaf yields ``(prefix, leaf)``.
    """
    if isinstance(tree, ArrayDict):
        yield from tree.items_flat(prefix)
        return
    pairs = children(tree)
    if pairs is None:
        yield prefix, tree
        return
    for key, value in pairs:
        yield from tree_items(value, f"{prefix}.{key}" if prefix else str(key))


def tree_to_ndarray(tree: Any) -> Any:
    """Replace every Array leaf by its zero-copy numpy view."""
    return tree_map(
        lambda leaf: leaf.to_ndarray() if isinstance(leaf, Array) else leaf, tree
    )


def tree_close(tree: Any) -> None:
    """Close (release the shared memory of) every Array leaf in ``tree``."""
    for _, leaf in tree_items(tree):
        if isinstance(leaf, Array):
            leaf.close()


def leaf_like(example: Any) -> np.ndarray:
    """``example`` as an ndarray, keeping numpy dtypes (Python floats become float64)."""
    return np.asarray(example)
