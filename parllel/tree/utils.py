"""Functions over nested trees: dicts, ArrayDicts, namedtuples and tuples."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
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
    "tree_to_builtin",
    "tree_to_ndarray",
]


def tree_map(
    fn: Callable[..., Any],
    tree: Any,
    *others: Any,
    is_leaf: Callable[[Any], bool] | None = None,
) -> Any:
    """Apply ``fn`` to every leaf of ``tree`` (and the matching leaves of ``others``).

    Containers (ArrayDict, dict, namedtuple, tuple, list) keep their type;
    everything else is a leaf, as is a container for which ``is_leaf``
    holds (e.g. a mapping that encodes one value). An ArrayDict is walked by
    :meth:`ArrayDict.map <parllel.tree.ArrayDict.map>` (its leaves are the
    values that are not ArrayDicts); other containers by the same rule, for
    the trees that are not ArrayDicts (an agent's state tuple, a step dict).

    Example:
        >>> tree_map(lambda a, b: a + b, {"x": 1, "y": (2, 3)}, {"x": 10, "y": (20, 30)})
        {'x': 11, 'y': (22, 33)}
    """
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *others)
    if isinstance(tree, ArrayDict) and is_leaf is None:
        return tree.map(fn, *others)
    if isinstance(tree, Mapping):
        mapping_type: Callable[..., Any] = type(tree)  # dict-like: built from a dict
        return mapping_type(
            {
                k: tree_map(fn, v, *(o[k] for o in others), is_leaf=is_leaf)
                for k, v in tree.items()
            }
        )
    if is_namedtuple(tree):
        return type(tree)(
            *(tree_map(fn, *items, is_leaf=is_leaf) for items in zip(tree, *others))
        )
    if isinstance(tree, (tuple, list)):
        return type(tree)(
            tree_map(fn, *items, is_leaf=is_leaf) for items in zip(tree, *others)
        )
    return fn(tree, *others)


def tree_items(
    tree: Any,
    prefix: str = "",
    *,
    children_of: Callable[[Any], Iterable[tuple[Any, Any]] | None] = children,
) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for every leaf, depth-first, paths joined by dots.

    An ArrayDict is walked by :meth:`ArrayDict.items_flat
    <parllel.tree.ArrayDict.items_flat>`; a bare leaf yields ``(prefix, leaf)``.
    ``children_of`` is the container rule (:func:`~parllel.tree.nodes.children`;
    :func:`~parllel.tree.nodes.mapping_children` for configs and state dicts,
    whose lists and empty mappings are values).
    """
    if children_of is children and isinstance(tree, ArrayDict):
        yield from tree.items_flat(prefix)
        return
    pairs = children_of(tree)
    if pairs is None:
        yield prefix, tree
        return
    for key, value in pairs:
        path = f"{prefix}.{key}" if prefix else str(key)
        yield from tree_items(value, path, children_of=children_of)


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


def tree_to_builtin(
    tree: Any,
    fn: Callable[[Any], Any],
    sequence: Callable[[Iterable[Any]], Any] = tuple,
) -> Any:
    """``fn`` of every leaf, nested as plain dicts and tuples (or lists).

    A node built from a tuple (an ArrayDict's ``is_sequence``, a tuple or
    list) becomes a ``sequence`` (tuple: the structure in which gymnasium
    batches ``Tuple`` and ``Dict`` values; list: plain data), any other
    container a dict.

    Example:
        >>> tree_to_builtin([{"a": np.zeros(2)}, np.zeros(3)], np.shape)
        ({'a': (2,)}, (3,))
    """
    pairs = children(tree)
    if pairs is None:
        return fn(tree)
    items = {key: tree_to_builtin(child, fn, sequence) for key, child in pairs}
    if getattr(tree, "is_sequence", False) or (
        isinstance(tree, (tuple, list)) and not is_namedtuple(tree)
    ):
        return sequence(items.values())
    return items
