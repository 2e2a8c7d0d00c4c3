"""ArrayDict: a nested, dict-like tree of arrays that indexes like one array."""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Literal, cast, overload

import numpy as np

from parllel.arrays import Array
from parllel.arrays.writing import closed_error
from parllel.errors import TreeStructureError
from parllel.tree.display import mappings_equal, tree_repr
from parllel.tree.nodes import tree_get
from parllel.tree.writing import join_path, write_tree


class ArrayDict(Mapping[str, Any]):
    """A nested mapping of named fields whose leaves are Arrays or ndarrays.

    Keys are strings, reached as ``tree["reward"]`` or ``tree.reward``. Any
    other subscript indexes every leaf: ``tree[t, b]`` is a tree of views and
    ``tree[t, b] = value`` writes every leaf from a dict, namedtuple, tree or
    broadcast scalar; a missing or unknown key raises
    :class:`~parllel.errors.TreeStructureError` naming the leaf path. Walk it
    with :meth:`items_flat` and :meth:`map` (see docs/arrays.md).

    Example:
        >>> tree = ArrayDict({"obs": Array((4, 2), (3,)), "reward": Array((4, 2))})
        >>> tree[0, 1] = {"obs": np.zeros(3, np.float32), "reward": 1.0}
        >>> float(tree.reward[0, 1])
        1.0
        >>> [path for path, leaf in tree.items_flat()]
        ['obs', 'reward']
        >>> tree.map(np.asarray).obs.shape
        (4, 2, 3)
        >>> tree.batch_shape
        (4, 2)
    """

    __slots__ = ("_items", "_sequence")
    _items: dict[str, Any]
    _sequence: bool

    def __init__(
        self, items: Mapping[str, Any] | None = None, *, sequence: bool = False
    ) -> None:
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_sequence", sequence)
        for key, value in (items or {}).items():
            self._set_field(key, value)

    # -- fields ------------------------------------------------------------
    def _set_field(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ArrayDict keys must be strings, got {key!r}")
        if value is None:
            raise TreeStructureError(f"field {key!r} cannot be None")
        if isinstance(value, Mapping) and not isinstance(value, ArrayDict):
            value = ArrayDict(value)
        self._items[key] = value

    def __getattr__(self, name: str) -> Any:
        try:
            return self._items[name]
        except KeyError:
            raise AttributeError(
                f"ArrayDict has no field {name!r}; fields: {list(self._items)}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"set fields by subscription: tree[{name!r}] = value (attribute "
            "assignment is refused so that typos cannot create fields)"
        )

    def __getstate__(self) -> tuple:
        return (self._items, self._sequence)

    def __setstate__(self, state: tuple) -> None:
        object.__setattr__(self, "_items", state[0])
        object.__setattr__(self, "_sequence", state[1])

    def __dir__(self) -> list[str]:
        return list(super().__dir__()) + list(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> KeysView[str]:
        """The top-level keys (a view, as ``dict.keys()``)."""
        return self._items.keys()

    def values(self) -> ValuesView[Any]:
        """The top-level values: leaves and subtrees (a view)."""
        return self._items.values()

    def items(self) -> ItemsView[str, Any]:
        """The top-level ``(key, value)`` pairs (a view); see :meth:`items_flat`."""
        return self._items.items()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` if there is none (no exception cost)."""
        return self._items.get(key, default)

    @property
    def is_sequence(self) -> bool:
        """True if the tree was built from a tuple (keys ``"0"``, ``"1"``, ...)."""
        return self._sequence

    # -- indexing ----------------------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        if type(index) is str:
            try:
                return self._items[index]
            except KeyError:
                raise KeyError(
                    f"ArrayDict has no field {index!r}; fields: {list(self._items)}"
                ) from None
        result = ArrayDict(sequence=self._sequence)
        items = result._items
        for key, leaf in self._items.items():
            items[key] = leaf[index]
        return result

    def __setitem__(self, index: Any, value: Any) -> None:
        if type(index) is str:
            self._set_field(index, value)
            return
        write_tree(self, index, value, "", {})

    def write(
        self, index: Any, value: Any, path: str = "", cache: dict | None = None
    ) -> None:
        """``tree[index] = value``, with errors naming leaves below ``path``.

        Args:
            index: any index the leaves accept (``tree[t, b]``, ``tree[t]``, ...).
            value: a mapping or namedtuple with this tree's keys, a tuple for a
                tree built from one, or one scalar/array written to every leaf.
            path: this tree's path in messages (a subtree's, when a parent writes).
            cache: shared by the Array leaves of one write, so Arrays alike
                translate ``index`` once (see :meth:`parllel.arrays.Array.write`).
        """
        write_tree(self, index, value, path, {} if cache is None else cache)

    # -- walking -------------------------------------------------------------
    @overload
    def items_flat(
        self, prefix: str = "", *, tuple_paths: Literal[False] = False
    ) -> Iterator[tuple[str, Any]]: ...

    @overload
    def items_flat(
        self, prefix: str | tuple[str, ...] = "", *, tuple_paths: Literal[True]
    ) -> Iterator[tuple[tuple[str, ...], Any]]: ...

    def items_flat(
        self, prefix: str | tuple[str, ...] = "", *, tuple_paths: bool = False
    ) -> Iterator[tuple[str, Any]] | Iterator[tuple[tuple[str, ...], Any]]:
        """Yield ``(path, leaf)`` for every leaf, depth-first in key order.

        A leaf is any value that is not an ArrayDict. Paths are keys joined
        with dots (``"observation.pos"``, after ``prefix``), or with
        ``tuple_paths=True`` key tuples (``("observation", "pos")``, after a
        tuple ``prefix``), which stay unambiguous when keys contain dots.

        Example:
            >>> tree = ArrayDict({"obs": {"pos": np.zeros(2)}, "reward": np.zeros(1)})
            >>> [path for path, _ in tree.items_flat(tuple_paths=True)]
            [('obs', 'pos'), ('reward',)]
        """
        if tuple_paths:
            start = prefix if isinstance(prefix, tuple) else (prefix,) if prefix else ()
            return self._items_tuple_paths(start)
        # a str by the overloads (a tuple prefix goes with tuple_paths=True)
        return self._items_dotted_paths(cast(str, prefix))

    def _items_dotted_paths(self, prefix: str) -> Iterator[tuple[str, Any]]:
        for key, value in self._items.items():
            path = join_path(prefix, key)
            if isinstance(value, ArrayDict):
                yield from value._items_dotted_paths(path)
            else:
                yield path, value

    def _items_tuple_paths(
        self, prefix: tuple[str, ...]
    ) -> Iterator[tuple[tuple[str, ...], Any]]:
        for key, value in self._items.items():
            path = prefix + (key,)
            if isinstance(value, ArrayDict):
                yield from value._items_tuple_paths(path)
            else:
                yield path, value

    def map(self, fn: Callable[..., Any], *others: Any) -> ArrayDict:
        """The same nesting with ``fn(leaf, *other_leaves)`` at every leaf.

        Args:
            fn: called once per leaf, depth-first in key order.
            *others: trees with (at least) this tree's keys: ArrayDicts or
                mappings, namedtuples by field name, tuples and lists by
                position (``"0"``, ``"1"``, ...); their leaves at the same
                paths are passed to ``fn`` after this tree's leaf.

        Returns:
            A new ArrayDict (built from a tuple if this one was); a mapping
            ``fn`` returns becomes a subtree.

        Raises:
            TreeStructureError: one of ``others`` lacks a path of this tree,
                or ``fn`` returned None.

        Example:
            >>> a = ArrayDict({"x": np.ones(2), "y": {"z": np.zeros(2)}})
            >>> a.map(lambda u, v: u + v, {"x": 1, "y": {"z": 2}}).y.z
            array([2., 2.])
        """
        return self._map(fn, others, "")

    def _map(self, fn: Callable[..., Any], others: tuple, prefix: str) -> ArrayDict:
        result = ArrayDict(sequence=self._sequence)
        for key, leaf in self._items.items():
            path = join_path(prefix, key)
            if others:
                matching = tuple(_child(other, key, path) for other in others)
            else:
                matching = ()
            if isinstance(leaf, ArrayDict):
                value = leaf._map(fn, matching, path)
            else:
                value = fn(leaf, *matching)
                if value is None:
                    raise TreeStructureError(
                        f"map function returned None at leaf {path!r}"
                    )
            result._set_field(key, value)
        return result

    @property
    def batch_shape(self) -> tuple[int, ...] | None:
        """The ``batch_shape`` shared by every leaf, if every leaf is an Array.

        None for a tree with another kind of leaf (numpy views, tensors: they
        do not say which of their dimensions are batch dimensions), with
        leaves that disagree, or without leaves.
        """
        shape = None
        for _, leaf in self.items_flat():
            if not isinstance(leaf, Array):
                return None
            if shape is None:
                shape = leaf.batch_shape
            elif leaf.batch_shape != shape:
                return None
        return shape

    # -- whole-tree operations -----------------------------------------------
    def to_ndarray(self) -> ArrayDict:
        """Tree of zero-copy numpy views of every leaf's batch window."""
        return self.map(_as_ndarray)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dicts holding the same leaves (e.g. for a checkpoint)."""
        return {
            key: value.to_dict() if isinstance(value, ArrayDict) else value
            for key, value in self._items.items()
        }

    def rotate(self) -> None:
        """Rotate every Array leaf (see :meth:`parllel.arrays.Array.rotate`)."""
        for path, leaf in self.items_flat():
            if isinstance(leaf, Array):
                if leaf.closed:
                    raise closed_error(f"rotate leaf {path!r}")
                leaf.rotate()

    def close(self) -> None:
        """Release the shared memory of every Array leaf (idempotent)."""
        for _, leaf in self.items_flat():
            if isinstance(leaf, Array):
                leaf.close()

    def __enter__(self) -> ArrayDict:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        """Mapping equality: the same keys, and leaves equal as whole arrays.

        ``other`` may be any Mapping (a plain nested dict too); leaves are equal if
        they are the same object or ``numpy.array_equal`` holds. Why Mapping
        semantics, and why trees are unhashable: docs/arrays.md ("Equality").
        """
        return mappings_equal(self, other)

    # mutable Mapping, unhashable as dict (mypy wants object's __hash__ type)
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return tree_repr(self)


def _as_ndarray(leaf: Any) -> np.ndarray:
    return leaf.to_ndarray() if isinstance(leaf, Array) else np.asarray(leaf)


def _child(tree: Any, key: str, path: str) -> Any:
    """``tree``'s child ``key`` (see :func:`~parllel.tree.nodes.tree_get`), named on error."""
    try:
        return tree_get(tree, key)
    except KeyError:
        raise TreeStructureError(
            f"cannot map over trees of different structure: no leaf {path!r} in "
            f"a {type(tree).__name__}"
        ) from None
