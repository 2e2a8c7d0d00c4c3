"""The learner's tree: the actors' ``[T, B_i]`` trees side by side as ``[T, sum B_i]``.

Leaves are ``[T, B, ...]`` (env axis 1) or per-env ``[B, ...]`` without
padding (env axis 0, e.g. ``bootstrap_value``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.errors import ConfigError
from parllel.samplers.tree_ring import LeafLayout
from parllel.tree import ArrayDict


def _paths(layout: ArrayDict) -> list[str]:
    return [path for path, _ in layout.items_flat()]


def env_axis(leaf: LeafLayout | Array) -> int:
    """The leaf's env axis: 1 for ``[T, B, ...]`` leaves, 0 for ``[B]`` leaves."""
    return 1 if len(leaf.batch_shape) >= 2 else 0


def _check_leaf(path: str, first: LeafLayout, leaf: LeafLayout, actor: int) -> None:
    if env_axis(leaf) == 0 and leaf.padding:
        raise ConfigError(
            f"leaf {path!r} of actor {actor}'s tree has batch shape "
            f"{leaf.batch_shape} and padding; a RaySampler needs [T, B, ...] "
            "leaves or per-env [B] leaves without padding"
        )
    if leaf.full_size != leaf.batch_shape[0]:
        raise ConfigError(
            f"leaf {path!r} of actor {actor}'s tree is full-size (sliding); a "
            "RaySampler sends whole batches and needs plain [T, B] leaves"
        )
    axis = env_axis(leaf)
    same = (
        axis == env_axis(first)
        and leaf.batch_shape[:axis] == first.batch_shape[:axis]
        and leaf.batch_shape[axis + 1 :] == first.batch_shape[axis + 1 :]
        and leaf.feature_shape == first.feature_shape
        and leaf.dtype == first.dtype
        and leaf.padding == first.padding
    )
    if not same:
        raise ConfigError(
            f"leaf {path!r} differs between actor 0 ({first}) and actor {actor} "
            f"({leaf}); every actor's tree needs the same T, feature shapes, "
            "dtypes and padding (only the number of envs may differ)"
        )


def joined_layout(layouts: Sequence[ArrayDict]) -> tuple[ArrayDict, list[slice]]:
    """The layout of the learner's tree and each actor's column slice in it.

    Args:
        layouts: each actor's :func:`~parllel.samplers.tree_ring.tree_layout`.

    Raises:
        ConfigError: the actors' trees differ in fields, T, feature shapes,
            dtypes or padding, or a leaf is not a plain ``[T, B, ...]`` leaf.
    """
    first = layouts[0]
    paths = _paths(first)
    columns, start = [], 0
    for actor, layout in enumerate(layouts):
        if _paths(layout) != paths:
            raise ConfigError(
                f"actor {actor}'s tree has the fields {_paths(layout)}, actor 0's "
                f"{paths}; every actor must build the same tree"
            )
        widths = set()
        for (path, leaf), (_, leaf0) in zip(layout.items_flat(), first.items_flat()):
            _check_leaf(path, leaf0, leaf, actor)
            widths.add(leaf.batch_shape[env_axis(leaf)])
        if len(widths) != 1:
            raise ConfigError(
                f"actor {actor}'s tree has leaves with different numbers of envs "
                f"{sorted(widths)}"
            )
        width = widths.pop()
        columns.append(slice(start, start + width))
        start += width

    def join(leaf: LeafLayout) -> LeafLayout:
        axis = env_axis(leaf)
        shape = (*leaf.batch_shape[:axis], start, *leaf.batch_shape[axis + 1 :])
        return replace(leaf, batch_shape=shape, full_size=shape[0])

    return first.map(join), columns


def allocate_local(layout: ArrayDict) -> ArrayDict:
    """A zero-filled tree of local-memory Arrays with the given layout."""

    def allocate(leaf: LeafLayout) -> Array:
        return Array(
            leaf.batch_shape,
            leaf.feature_shape,
            leaf.dtype,
            storage="local",
            padding=leaf.padding,
        )

    return layout.map(allocate)


def batch_arrays(tree: ArrayDict) -> list[np.ndarray]:
    """Every leaf of a tree with its padding rows (``[P + T + P, B, ...]``), in
    the tree's flat order: what an actor sends for one batch."""
    return [leaf.padded_ndarray() for _, leaf in tree.items_flat()]


def copy_columns(
    leaves: Sequence[Any], arrays: Sequence[np.ndarray], columns: slice
) -> None:
    """Write one actor's :func:`batch_arrays` into its columns of the learner's leaves."""
    for leaf, array in zip(leaves, arrays):
        if env_axis(leaf):
            leaf.padded_ndarray()[:, columns] = array
        else:
            leaf.padded_ndarray()[columns] = array
