"""Functions over nested trees: dicts, ArrayDicts, namedtuples and tuples."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.tree.array_dict import ArrayDict


def is_namedtuple(obj: object) -> bool:
    """True for instances of ``collections.namedtuple`` / ``typing.NamedTuple``."""
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def tree_get(tree: Any, key: str) -> Any:
    """The child ``key`` of a container, keyed as in trees built from it.

    Mappings and ArrayDicts by key, namedtuples by field name, tuples and
    lists by position (``"0"``, ``"1"``, ...), so a tuple and the ArrayDict
    built from it answer the same keys.

    Example:
        >>> tree_get((np.zeros(2), {"a": 1}), "1")
        {'a': 1}

    Raises:
        KeyError: ``tree`` has no child ``key`` (or is not a container).
    """
    if isinstance(tree, Mapping):
        return tree[key]
    if is_namedtuple(tree):
        try:
            return getattr(tree, key)
        except AttributeError:
            raise KeyError(key) from None
    if isinstance(tree, (tuple, list)) and key.isdigit() and int(key) < len(tree):
        return tree[int(key)]
    raise KeyError(key)


def tree_map(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """Apply ``fn`` to every leaf of ``tree`` (and the matching leaves of ``others``).

    Containers (ArrayDict, dict, namedtuple, tuple, list) keep their type;
    everything else is a leaf.

    Example:
        >>> tree_map(lambda a, b: a + b, {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)})
        {'x': 11, 'y': (22, 33)}
    """
    if isinstance(tree, ArrayDict):
        return ArrayDict(
            {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()},
            sequence=tree.is_sequence,
        )
    if isinstance(tree, Mapping):
        return type(tree)(
            {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
        )
    if is_namedtuple(tree):
        return type(tree)(*(tree_map(fn, *items) for items in zip(tree, *others)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, *items) for items in zip(tree, *others))
    return fn(tree, *others)


def tree_items(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf, depth-first, paths joined by dots."""
    if isinstance(tree, Mapping):
        children: Any = tree.items()
    elif is_namedtuple(tree):
        children = tree._asdict().items()
    elif isinstance(tree, (tuple, list)):
        children = ((str(i), v) for i, v in enumerate(tree))
    else:
        yield prefix, tree
        return
    for key, value in children:
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
