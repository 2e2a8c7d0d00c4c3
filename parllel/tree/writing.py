"""Writing a nested value into the leaves of a tree: the one tree writer.

Every write of nested values into slots walks the tree and the value
together with :func:`write_nested`: ArrayDict's ``tree[index] = value``
(:func:`write_tree`), the handlers' agent
outputs, the multi-agent adapters' stacked observations and the interop
adapters' actions. Callers differ only in how one leaf is written and in
their :class:`WriteRules`; errors name the leaf path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.arrays.writing import check_value_dtype
from parllel.errors import ShapeError, TreeStructureError
from parllel.tree.nodes import is_namedtuple

#: ``write_leaf(leaf, item, path)``: writes one leaf's item (and checks it).
LeafWriter = Callable[[Any, Any, str], None]


@dataclasses.dataclass(frozen=True)
class WriteRules:
    """How a written value may differ from its tree, and how a mismatch is named.

    Attributes:
        what: the value in messages (``"written value"``, ``"the agent's
            output"``, ``"actions"``).
        error: the exception class (or factory) of a structure mismatch.
        broadcast: a value that is no container is written to every leaf
            below (ArrayDict's ``tree[t] = 0``); otherwise it is a mismatch.
        extra_ok: keys of the value that the tree lacks are ignored.
    """

    what: str = "written value"
    error: Callable[[str], Exception] = TreeStructureError
    broadcast: bool = False
    extra_ok: bool = False


#: ArrayDict's rules: exact keys, one scalar/array broadcast to every leaf.
TREE_RULES = WriteRules(broadcast=True)


def join_path(prefix: str, key: str) -> str:
    """``prefix.key``, or ``key`` at the root."""
    return f"{prefix}.{key}" if prefix else key


def takes_sequence(tree: Mapping[str, Any]) -> bool:
    """Whether a tree node takes a tuple or list, filling its children in order.

    An ArrayDict says so itself (``is_sequence``: built from a tuple); a
    plain mapping does if its keys are ``"0"``, ``"1"``, ... in order.
    """
    flag = getattr(tree, "is_sequence", None)
    if flag is not None:
        return bool(flag)
    return all(key == str(i) for i, key in enumerate(tree))


def write_nested(
    tree: Any,
    value: Any,
    write_leaf: LeafWriter,
    rules: WriteRules = TREE_RULES,
    path: str = "",
) -> None:
    """Write ``value`` into every leaf of ``tree``, walking both together.

    ``tree``'s containers are Mappings (ArrayDicts or dicts); anything else
    is a leaf, written with ``write_leaf(leaf, item, path)``. A value node
    fits a tree node if it is a mapping or namedtuple with the node's keys,
    or a tuple/list with one item per child of a node that
    :func:`takes_sequence` (see :class:`WriteRules` for broadcasting and
    extra keys).

    Example:
        >>> out = {"a": np.zeros(2), "b": {"c": np.zeros(2)}}
        >>> write_nested(out, {"a": 1, "b": {"c": 2}}, lambda o, v, p: o.fill(v))
        >>> out["b"]["c"].tolist()
        [2.0, 2.0]

    Raises:
        TreeStructureError (or ``rules.error``): the value's structure does
            not fit; names the missing and extra leaves.
    """
    if not isinstance(tree, Mapping):
        write_leaf(tree, value, path)
        return
    items = tree.items()
    given = value
    if type(value) is dict or isinstance(value, Mapping):
        pass
    elif is_namedtuple(value):
        value = value._asdict()
    elif isinstance(value, (tuple, list)) and takes_sequence(tree):
        if len(value) < len(items) or (len(value) > len(items) and not rules.extra_ok):
            raise mismatch_error(tree, given, path, rules)
        value = dict(zip(tree, value))
    elif rules.broadcast and value is not None:
        value = dict.fromkeys(tree, value)
    else:
        raise mismatch_error(tree, given, path, rules)
    if len(value) != len(items) and not rules.extra_ok:
        raise mismatch_error(tree, given, path, rules)
    for key, leaf in items:
        try:
            item = value[key]
        except KeyError:
            raise mismatch_error(tree, given, path, rules) from None
        if isinstance(leaf, Mapping):
            write_nested(leaf, item, write_leaf, rules, join_path(path, key))
        else:  # a leaf, written without another call here (per-step writes)
            write_leaf(leaf, item, join_path(path, key))


def write_tree(tree: Any, index: Any, value: Any, prefix: str, cache: dict) -> None:
    """Write ``value`` at ``index`` into every leaf of ``tree`` (an ArrayDict).

    ``cache`` is shared by the Array leaves of this one write (see
    :meth:`parllel.arrays.Array.write`), so leaves alike translate ``index``
    only once.

    Raises:
        TreeStructureError: ``value`` is None or has missing or extra leaves.
        ShapeError, DtypeError: a leaf's value does not fit (naming the leaf).
    """

    def at_index(leaf: Any, item: Any, path: str) -> None:
        if type(leaf) is Array:
            leaf.write(index, item, path, cache)
        else:
            write_leaf(leaf, index, item, path, cache)

    write_nested(tree, value, at_index, TREE_RULES, prefix)


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


def mismatch_error(
    tree: Mapping[str, Any], value: Any, path: str, rules: WriteRules = TREE_RULES
) -> Exception:
    """The error for ``value`` whose structure does not fit the node ``tree``.

    Names what the node takes, what came, and the missing (and, unless
    ``rules.extra_ok``, extra) leaves.
    """
    keys = _value_keys(value, tree)
    parts = []
    if keys is not None:
        missing = [join_path(path, k) for k in tree if k not in keys]
        if missing:
            parts.append(f"missing leaves {missing}")
        extra = [join_path(path, k) for k in keys if k not in tree]
        if extra and not rules.extra_ok:
            parts.append(f"unknown leaves {extra}")
    expected = f"a dict with keys {list(tree)}"
    if takes_sequence(tree):
        expected = f"a tuple of {len(tree)} items or {expected}"
    where = f" at {path!r}" if path else ""
    detail = f": {'; '.join(parts)}" if parts else ""
    return rules.error(
        f"{rules.what}{where} must be {expected}, got {describe(value)}{detail}"
    )


def _value_keys(value: Any, tree: Mapping[str, Any]) -> Iterable[str] | None:
    """The keys ``value`` offers a node of ``tree`` (None: not a container)."""
    if isinstance(value, Mapping):
        return [str(k) for k in value]
    if is_namedtuple(value):
        return list(value._fields)
    if isinstance(value, (tuple, list)) and takes_sequence(tree):
        return [str(i) for i in range(len(value))]
    return None


def describe(value: Any) -> str:
    """A short description of a written value for messages."""
    if isinstance(value, Mapping):
        return f"a {type(value).__name__} with keys {list(value)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"{type(value).__name__} {value!r}"[:200]
