"""How trees compare and print: Mapping equality over array leaves, an indented repr."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def mappings_equal(tree: Mapping[str, Any], other: object) -> bool | Any:
    """Mapping equality with array leaves (``ArrayDict.__eq__``).

    The same keys, subtrees equal recursively, and leaves that are the same
    object or pass ``numpy.array_equal``. ``NotImplemented`` if ``other`` is not
    a Mapping.
    """
    if tree is other:
        return True
    if not isinstance(other, Mapping):
        return NotImplemented
    if len(other) != len(tree):
        return False
    for key, leaf in tree.items():
        if key not in other:
            return False
        value = other[key]
        if leaf is value:
            continue
        if isinstance(leaf, Mapping) or isinstance(value, Mapping):
            if not (isinstance(value, Mapping) and isinstance(leaf, Mapping)):
                return False
            if not leaf == value:
                return False
        elif not np.array_equal(leaf, value):
            return False
    return True


def tree_repr(tree: Mapping[str, Any], indent: int = 0) -> str:
    """An indented ``ArrayDict({...})`` listing; ndarray leaves by shape and dtype."""
    pad = "  " * (indent + 1)
    lines = ["ArrayDict({"]
    for key, value in tree.items():
        if isinstance(value, Mapping):
            text = tree_repr(value, indent + 1)
        elif isinstance(value, np.ndarray):
            text = f"ndarray(shape={value.shape}, dtype={value.dtype})"
        else:
            text = repr(value)
        lines.append(f"{pad}{key!r}: {text},")
    lines.append("  " * indent + "})")
    return "\n".join(lines)
