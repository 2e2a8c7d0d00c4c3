"""Sample-tree slots as arguments of jitted functions, and results back as numpy."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from parllel.arrays import Array
from parllel.tree.utils import tree_to_builtin

__all__ = ["host_arrays", "jax_input"]


def jax_input(tree: Any) -> Any:
    """A sample-tree slot (ndarray, Array or tree of them) as a jit argument:
    numpy leaves in plain dicts and tuples (no copy here)."""
    if tree is None:
        return None
    return tree_to_builtin(
        tree, lambda leaf: leaf.to_ndarray() if isinstance(leaf, Array) else leaf
    )


def host_arrays(tree: Any) -> Any:
    """A jitted call's results (a pytree of arrays) as numpy arrays.

    One ``np.asarray`` per leaf: on a CPU each is a view of XLA's result
    buffer. Cheaper per step than ``jax.device_get``, which first starts an
    asynchronous host copy of every leaf.
    """
    return jax.tree_util.tree_map(np.asarray, tree)
