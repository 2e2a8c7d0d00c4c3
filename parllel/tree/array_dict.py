"""ArrayDict: a nested, dict-like tree of arrays that indexes like one array."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.arrays.array import GEOMETRY_EPOCH
from parllel.arrays.writing import check_value_dtype, closed_error, write_error
from parllel.errors import DtypeError, ShapeError, TreeStructureError


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


class ArrayDict(Mapping):
    """A nested mapping of named fields whose leaves are Arrays or ndarrays.

    Keys are strings, reachable by subscription (``tree["reward"]``) and as
    attributes (``tree.reward``; an unknown attribute raises
    ``AttributeError`` listing the keys, nothing is forwarded to leaves).
    Any non-string subscript indexes every leaf: ``tree[t, b]`` returns a new
    ArrayDict of the leaves' ``[t, b]`` views, and ``tree[t, b] = value``
    writes every leaf from a dict, a namedtuple or a matching tree (or one
    scalar/array broadcast to every leaf). Writing ``None``, leaving a key out
    or adding an unknown one raises :class:`~parllel.errors.TreeStructureError`
    naming the leaf path; a bad shape or dtype raises
    :class:`~parllel.errors.ShapeError` / :class:`~parllel.errors.DtypeError`
    naming it too. Add a field with ``tree["advantage"] = Array(...)``.

    A tree built from a tuple (e.g. a gymnasium ``Tuple`` space sample) has
    keys ``"0"``, ``"1"``, ... and also accepts tuples when written.

    Example:
        >>> tree = ArrayDict({"obs": Array((4, 2), (3,)), "reward": Array((4, 2))})
        >>> tree[0, 1] = {"obs": np.zeros(3, np.float32), "reward": 1.0}
        >>> float(tree.reward[0, 1])
        1.0
    """

    __slots__ = ("_items", "_sequence", "_fast")

    def __init__(
        self, items: Mapping[str, Any] | None = None, *, sequence: bool = False
    ) -> None:
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_sequence", sequence)
        object.__setattr__(self, "_fast", (-1, None, 0, 0))
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
        object.__setattr__(self, "_fast", (-1, None, 0, 0))

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
        object.__setattr__(self, "_fast", (-1, None, 0, 0))

    def __dir__(self) -> list[str]:
        return list(super().__dir__()) + list(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

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

    def __setitem__(
        self, index: Any, value: Any, _epoch: list = GEOMETRY_EPOCH
    ) -> None:
        if type(value) is dict and type(index) is tuple and len(index) == 2:
            # Fast path for the sampler's ``tree[t, b] = {...}``: one cached
            # tuple and a compiled writer (every Python step here costs about
            # as much as one leaf write, so the checks are kept minimal).
            t, b = index
            epoch, writer, n_fields, min_length = self._fast
            if epoch != _epoch[0]:
                self._leaf_table()
                epoch, writer, n_fields, min_length = self._fast
            if type(t) is int and 0 <= t < min_length and len(value) == n_fields:
                try:
                    writer(value, t, b)
                except KeyError:
                    self._raise_key_mismatch(value.keys(), "")
                return
        if type(index) is str:
            self._set_field(index, value)
            return
        self._write(index, value, "", {})

    def _write(self, index: Any, value: Any, prefix: str, cache: dict) -> None:
        """Write ``value`` at ``index`` into every leaf.

        ``cache`` maps a leaf geometry (window base, length, padding, ndim) to
        the translated storage index, so leaves alike translate it only once.
        """
        items = self._items
        if type(value) is dict or isinstance(value, Mapping):
            if len(value) != len(items):
                self._raise_key_mismatch(value.keys(), prefix)
            getter = value.__getitem__
        elif isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
            value = value._asdict()
            if len(value) != len(items):
                self._raise_key_mismatch(value.keys(), prefix)
            getter = value.__getitem__
        elif self._sequence and isinstance(value, (tuple, list)):
            if len(value) != len(items):
                raise TreeStructureError(
                    f"wrote a sequence of {len(value)} items into {prefix or 'the tree'}, "
                    f"which has {len(items)} fields"
                )
            value = dict(zip(items, value))
            getter = value.__getitem__
        elif value is None:
            raise TreeStructureError(
                f"cannot write None into {prefix or 'the tree'} (fields: {list(items)})"
            )
        else:  # one scalar/array broadcast to every leaf

            def getter(key: str, value: Any = value) -> Any:
                return value

        fast = type(index) is tuple and index and type(index[0]) is int
        for key, leaf in items.items():
            try:
                item = getter(key)
            except KeyError:
                self._raise_key_mismatch(value.keys(), prefix)
            if type(leaf) is Array:
                if fast:  # inline translation of the common ``[t, b, ...]`` case
                    t = index[0]
                    if 0 <= t < leaf._length:
                        storage_index = (leaf._base + t,) + index[1:]
                    else:
                        storage_index = (leaf._indexer.row(t),) + index[1:]
                else:
                    geometry = (leaf._base, leaf._length, leaf.padding, leaf.ndim)
                    storage_index = cache.get(geometry)
                    if storage_index is None:
                        storage_index = cache[geometry] = leaf._indexer.translate(index)
                if item is None or getattr(item, "dtype", None) is not leaf.dtype:
                    try:
                        item = check_value_dtype(item, leaf.dtype, _join(prefix, key))
                    except DtypeError as exc:
                        raise exc from None
                try:
                    leaf._storage[storage_index] = item
                except ValueError as exc:
                    raise write_error(
                        item, leaf._storage, storage_index, _join(prefix, key), exc
                    ) from None
            elif isinstance(leaf, ArrayDict):
                leaf._write(index, item, _join(prefix, key), cache)
            else:
                _write_ndarray_leaf(leaf, index, item, _join(prefix, key))

    def _leaf_table(self) -> list[tuple]:  # also refreshes the fast-path cache
        """Per-field ``(key, storage, base, dtype, plain_types, leaf)`` rows.

        Array leaves have ``leaf=None`` (they are written through ``storage``
        at row ``base + t``); other leaves keep ``leaf`` and are written the
        general way. Rebuilt when a field is set or any Array's window moved
        (``GEOMETRY_EPOCH``). Also caches the shortest batch length.
        """
        table = []
        min_length = 1 << 62
        for key, leaf in self._items.items():
            if type(leaf) is Array:
                table.append(
                    (
                        key,
                        leaf._storage,
                        leaf._base,
                        leaf.dtype,
                        leaf._plain_types,
                        None,
                    )
                )
                min_length = min(min_length, leaf._length)
            else:
                table.append((key, None, 0, None, None, leaf))
                min_length = 0  # general path for trees with other leaves
        writer = _compile_writer(table)
        object.__setattr__(
            self, "_fast", (GEOMETRY_EPOCH[0], writer, len(table), min_length)
        )
        return table

    def _raise_key_mismatch(self, keys: Any, prefix: str) -> None:
        keys = set(keys)
        missing = [_join(prefix, k) for k in self._items if k not in keys]
        extra = [_join(prefix, k) for k in keys if k not in self._items]
        parts = []
        if missing:
            parts.append(f"missing leaves {missing}")
        if extra:
            parts.append(f"unknown leaves {extra}")
        raise TreeStructureError(
            "written value does not match the tree: " + "; ".join(parts)
        )

    # -- whole-tree operations -----------------------------------------------
    def items_flat(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """Yield ``(path, leaf)`` pairs depth-first, paths joined with dots."""
        for key, value in self._items.items():
            path = _join(prefix, key)
            if isinstance(value, ArrayDict):
                yield from value.items_flat(path)
            else:
                yield path, value

    def to_ndarray(self) -> ArrayDict:
        """Tree of zero-copy numpy views of every leaf's batch window."""
        return ArrayDict(
            {
                k: v.to_ndarray()
                if isinstance(v, (Array, ArrayDict))
                else np.asarray(v)
                for k, v in self._items.items()
            },
            sequence=self._sequence,
        )

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
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return self._repr(0)

    def _repr(self, indent: int) -> str:
        pad = "  " * (indent + 1)
        lines = ["ArrayDict({"]
        for key, value in self._items.items():
            if isinstance(value, ArrayDict):
                text = value._repr(indent + 1)
            elif isinstance(value, np.ndarray):
                text = f"ndarray(shape={value.shape}, dtype={value.dtype})"
            else:
                text = repr(value)
            lines.append(f"{pad}{key!r}: {text},")
        lines.append("  " * indent + "})")
        return "\n".join(lines)


def _write_general_leaf(leaf: Any, index: Any, item: Any, path: str) -> None:
    """Write into a leaf that is not an Array (a subtree or an ndarray)."""
    if isinstance(leaf, ArrayDict):
        leaf._write(index, item, path, {})
    else:
        _write_ndarray_leaf(leaf, index, item, path)


def _write_ndarray_leaf(leaf: np.ndarray, index: Any, item: Any, path: str) -> None:
    """Write into a plain numpy leaf with the same checks as an Array leaf."""
    item = check_value_dtype(item, leaf.dtype, path)
    try:
        leaf[index] = item
    except ValueError as exc:
        raise ShapeError(f"{exc} at leaf {path!r}") from None


def _compile_writer(table: list[tuple]) -> Any:
    """Build ``write(value, t, b)`` for ``tree[t, b] = value``, unrolled per field.

    The sampler's hot write runs once per env step; a loop over the fields
    with its tuple unpacking costs as much as the writes themselves, so the
    loop is unrolled into straight-line code (field names and storage rows are
    constants). Same checks as the general path: dtype-kind safety and shape
    errors naming the leaf; other leaf kinds go through the general path.
    """
    namespace: dict[str, Any] = {
        "check_value_dtype": check_value_dtype,
        "write_error": write_error,
        "write_general_leaf": _write_general_leaf,
    }
    lines = ["def write(value, t, b):"]
    for i, (key, storage, base, dtype, plain_types, leaf) in enumerate(table):
        name = repr(key)
        lines.append(f"    item = value[{name}]")
        if leaf is not None:
            namespace[f"leaf{i}"] = leaf
            lines.append(f"    write_general_leaf(leaf{i}, (t, b), item, {name})")
            continue
        namespace.update({f"s{i}": storage, f"d{i}": dtype, f"p{i}": plain_types})
        lines += [
            f"    if type(item) not in p{i} and getattr(item, 'dtype', None) is not d{i}:",
            f"        item = check_value_dtype(item, d{i}, {name})",
            "    try:",
            f"        s{i}[{base} + t, b] = item",
            "    except ValueError as exc:",
            f"        raise write_error(item, s{i}, ({base} + t, b), {name}, exc) from None",
        ]
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), namespace)  # noqa: S102 (generated from our own table)
    return namespace["write"]
