"""Writing one value into every leaf of a tree: ``tree[index] = value``.

The general path behind :meth:`ArrayDict.write <parllel.tree.ArrayDict.write>`
(the sampler's ``tree[t, b] = {...}`` mostly takes the compiled one, see
:mod:`parllel.arrays.fast_writer`). A value is a mapping, a namedtuple, a
tuple for a tree built from one, or one scalar/array broadcast to every leaf;
errors name the leaf path.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from parllel.arrays import Array
from parllel.arrays.writing import check_value_dtype
from parllel.errors import ShapeError, TreeStructureError


class WritableTree(Protocol):
    """What :func:`write_tree` needs of a tree node (an ArrayDict is one).

    Typed structurally so that this module need not import
    :mod:`parllel.tree.array_dict`, which imports it.
    """

    @property
    def is_sequence(self) -> bool:
        """Whether the node was built from a tuple (it takes sequences too)."""
        ...

    def items(self) -> ItemsView[str, Any]:
        """The node's ``(key, child)`` pairs."""
        ...

    def __iter__(self) -> Iterator[str]: ...

    def __contains__(self, key: object) -> bool: ...


def join_path(prefix: str, key: str) -> str:
    """``prefix.key``, or ``key`` at the root."""
    return f"{prefix}.{key}" if prefix else key


def write_tree(
    tree: WritableTree, index: Any, value: Any, prefix: str, cache: dict
) -> None:
    """Write ``value`` at ``index`` into every leaf of ``tree`` (an ArrayDict).

    ``cache`` is shared by the Array leaves of this one write (see
    :meth:`parllel.arrays.Array.write`), so leaves alike translate ``index``
    only once.

    Raises:
        TreeStructureError: ``value`` is None or has missing or extra leaves.
        ShapeError, DtypeError: a leaf's value does not fit (naming the leaf).
    """
    items = tree.items()
    if type(value) is dict or isinstance(value, Mapping):
        if len(value) != len(items):
            raise key_mismatch_error(tree, value.keys(), prefix)
        getter = value.__getitem__
    elif isinstance(value, tuple) and hasattr(value, "_asdict"):  # namedtuple
        value = value._asdict()
        if len(value) != len(items):
            raise key_mismatch_error(tree, value.keys(), prefix)
        getter = value.__getitem__
    elif tree.is_sequence and isinstance(value, (tuple, list)):
        if len(value) != len(items):
            raise TreeStructureError(
                f"wrote a sequence of {len(value)} items into {prefix or 'the tree'}, "
                f"which has {len(items)} fields"
            )
        value = dict(zip(tree, value))
        getter = value.__getitem__
    elif value is None:
        raise TreeStructureError(
            f"cannot write None into {prefix or 'the tree'} (fields: {list(tree)})"
        )
    else:  # one scalar/array broadcast to every leaf

        def getter(key: str, value: Any = value) -> Any:
            return value

    for key, leaf in items:
        try:
            item = getter(key)
        except KeyError:
            raise key_mismatch_error(tree, value.keys(), prefix) from None
        if type(leaf) is Array:
            leaf.write(index, item, join_path(prefix, key), cache)
        else:
            write_leaf(leaf, index, item, join_path(prefix, key), cache)


def write_leaf(
    leaf: Any, index: Any, item: Any, path: str, cache: dict | None = None
) -> None:
    """Write ``item`` at ``index`` into one leaf: an Array, a subtree or an ndarray."""
    kind = type(leaf)
    if kind is Array or (kind is not np.ndarray and isinstance(leaf, Mapping)):
        leaf.write(index, item, path, cache)
        return
    item = check_value_dtype(item, leaf.dtype, path)
    try:
        leaf[index] = item
    except ValueError as exc:
        raise ShapeError(f"{exc} at leaf {path!r}") from None


def key_mismatch_error(
    tree: WritableTree | Mapping[str, Any], keys: Iterable[str], prefix: str
) -> TreeStructureError:
    """The error for a written mapping whose keys differ from ``tree``'s."""
    keys = set(keys)
    missing = [join_path(prefix, k) for k in tree if k not in keys]
    extra = [join_path(prefix, k) for k in keys if k not in tree]
    parts = []
    if missing:
        parts.append(f"missing leaves {missing}")
    if extra:
        parts.append(f"unknown leaves {extra}")
    return TreeStructureError(
        "written value does not match the tree: " + "; ".join(parts)
    )
