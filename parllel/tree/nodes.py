"""What counts as a container in a tree, and how its children are keyed.

One rule for every walk over nested data: Mappings (ArrayDicts included) by
key, namedtuples by field name, tuples and lists by position (``"0"``,
``"1"``, ...); anything else is a leaf. :class:`~parllel.tree.ArrayDict`'s
``map``/``items_flat`` and the generic ``tree_map``/``tree_items`` all follow
it (:func:`mapping_children` is the narrower rule of configs and state
dicts). Writing follows it too: :func:`~parllel.tree.writing.write_nested`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def is_namedtuple(obj: object) -> bool:
    """True for instances of ``collections.namedtuple`` / ``typing.NamedTuple``."""
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def children(node: Any) -> Iterable[tuple[str, Any]] | None:
    """The ``(key, child)`` pairs of a container, or None if ``node`` is a leaf.

    Example:
        >>> list(children((7, {"a": 1})))
        [('0', 7), ('1', {'a': 1})]
    """
    if isinstance(node, Mapping):
        return node.items()
    if is_namedtuple(node):
        return node._asdict().items()
    if isinstance(node, (tuple, list)):
        return ((str(i), child) for i, child in enumerate(node))
    return None


def mapping_children(node: Any) -> Iterable[tuple[Any, Any]] | None:
    """The ``(key, child)`` pairs of a non-empty Mapping, else None (a leaf).

    The rule for configs and state dicts (:mod:`parllel.checkpoints.compatibility`):
    their lists and tuples are values compared whole, and an empty mapping
    is a value too (so ``{}`` differs from an absent key).
    """
    if isinstance(node, Mapping) and node:
        return node.items()
    return None


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
