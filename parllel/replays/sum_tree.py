"""A sum tree: proportional sampling and priority updates in ``O(log n)``.

Leaves hold non-negative priorities; every inner node holds the sum of its
two children, so the root holds the total. The tree is a flat array of
``2 * leaf_count`` entries (``leaf_count`` a power of two): node ``i`` has
children ``2i`` and ``2i + 1``, leaves start at ``leaf_count``, entry 0 is
unused. Kernels are numba-jitted pure functions with explicit outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numba
import numpy as np

from parllel.errors import ConfigError

__all__ = ["SumTree", "find_prefix_sums", "set_priorities"]


@numba.njit(cache=True)
def set_priorities(  # pragma: no cover - jit
    nodes: np.ndarray, leaf_count: int, indices: np.ndarray, priorities: np.ndarray
) -> None:
    """Write ``priorities`` at leaf ``indices`` and update every ancestor sum."""
    for k in range(indices.shape[0]):
        node = leaf_count + indices[k]
        nodes[node] = priorities[k]
        node //= 2
        while node >= 1:
            nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
            node //= 2


@numba.njit(cache=True)
def find_prefix_sums(  # pragma: no cover - jit
    nodes: np.ndarray, leaf_count: int, values: np.ndarray, out: np.ndarray
) -> None:
    """For each value in ``[0, total)``, the leaf whose prefix-sum span holds it.

    A subtree with zero sum is never entered, so a zero-priority leaf is never
    returned while the total is positive.
    """
    for k in range(values.shape[0]):
        value = values[k]
        node = 1
        while node < leaf_count:
            left = 2 * node
            if value < nodes[left] or nodes[left + 1] <= 0.0:
                node = left
            else:
                value -= nodes[left]
                node = left + 1
        out[k] = node - leaf_count


class SumTree:
    """Priorities of ``size`` items with proportional sampling.

    Example:
        >>> tree = SumTree(4)
        >>> tree.set(np.array([0, 3]), np.array([1.0, 3.0]))
        >>> tree.total
        4.0
        >>> tree.find(np.array([0.5, 1.5]))
        array([0, 3])

    Args:
        size: number of items (leaves).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ConfigError(f"SumTree size must be >= 1; got {size}")
        self.size = int(size)
        self.leaf_count = 1 << max(0, (self.size - 1).bit_length())
        self.nodes = np.zeros(2 * self.leaf_count, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self.nodes[1])

    @property
    def priorities(self) -> np.ndarray:
        """Read-only view of the ``size`` leaf priorities."""
        view = self.nodes[self.leaf_count : self.leaf_count + self.size]
        view.flags.writeable = False
        return view

    def set(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaf ``indices`` to ``priorities`` (non-negative, finite).

        Raises:
            ConfigError: an index out of range or a bad priority.
        """
        indices = np.ascontiguousarray(indices, dtype=np.int64).ravel()
        priorities = np.ascontiguousarray(priorities, dtype=np.float64).ravel()
        if indices.shape != priorities.shape:
            raise ConfigError(
                f"{indices.size} indices but {priorities.size} priorities"
            )
        if indices.size and (indices.min() < 0 or indices.max() >= self.size):
            raise ConfigError(f"SumTree indices must be in [0, {self.size})")
        if not (np.isfinite(priorities).all() and (priorities >= 0).all()):
            raise ConfigError("priorities must be finite and non-negative")
        set_priorities(self.nodes, self.leaf_count, indices, priorities)

    def find(self, values: np.ndarray) -> np.ndarray:
        """Leaves whose prefix-sum spans hold ``values`` (each in ``[0, total)``)."""
        values = np.ascontiguousarray(values, dtype=np.float64).ravel()
        out = np.empty(values.shape[0], dtype=np.int64)
        find_prefix_sums(self.nodes, self.leaf_count, values, out)
        return out

    def state_dict(self) -> dict[str, Any]:
        """A copy of the leaf priorities."""
        return {"priorities": self.priorities.copy()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Rebuild the tree from saved leaf priorities.

        Raises:
            ConfigError: the saved tree has another size.
        """
        priorities = np.asarray(state["priorities"], dtype=np.float64)
        if priorities.shape != (self.size,):
            raise ConfigError(
                f"saved priorities have shape {priorities.shape}; expected ({self.size},)"
            )
        if not (np.isfinite(priorities).all() and (priorities >= 0).all()):
            raise ConfigError("priorities must be finite and non-negative")
        self.nodes[:] = 0.0
        self.nodes[self.leaf_count : self.leaf_count + self.size] = priorities
        level = self.leaf_count
        while level > 1:  # each level's sums from the one below, bottom-up
            level //= 2
            below = self.nodes[2 * level : 4 * level]
            self.nodes[level : 2 * level] = below[0::2] + below[1::2]
