"""Transform base class, pipeline, and sample-tree field helpers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from parllel.arrays import Array
from parllel.errors import ConfigError, DtypeError, ShapeError


def field_name(path: str | tuple[str, ...]) -> str:
    """Dotted name of a field path, for messages (``agent_info.value``)."""
    return path if isinstance(path, str) else ".".join(path)


def get_field(sample_tree: Any, path: str | tuple[str, ...], purpose: str = "") -> Any:
    """Return the leaf or subtree at ``path``; ConfigError naming it if missing."""
    keys = (path,) if isinstance(path, str) else tuple(path)
    node = sample_tree
    for depth, key in enumerate(keys):
        if not isinstance(node, Mapping) or key not in node:
            where = field_name(keys[: depth + 1])
            why = f" ({purpose})" if purpose else ""
            raise ConfigError(f"sample tree is missing field '{where}'{why}")
        node = node[key]
    return node


def has_field(sample_tree: Any, path: str | tuple[str, ...]) -> bool:
    """Whether ``path`` exists in the sample tree."""
    try:
        get_field(sample_tree, path)
    except ConfigError:
        return False
    return True


def as_ndarray(leaf: Any, name: str) -> np.ndarray:
    """Zero-copy numpy view of a leaf's ``[T, B, ...]`` batch rows."""
    if isinstance(leaf, Array):
        return leaf.to_ndarray()
    if isinstance(leaf, np.ndarray):
        return leaf
    raise ConfigError(
        f"field '{name}' must be an Array or numpy array, got {type(leaf).__name__}"
    )


def allocate_field(
    sample_tree: Any,
    key: str,
    like: Any,
    feature_shape: tuple[int, ...],
    dtype: Any,
) -> Array | np.ndarray:
    """Add field ``key`` (``[T, B, *feature_shape]``) next to leaf ``like``.

    The new leaf has ``like``'s batch shape and storage (an Array if ``like``
    is one, else a numpy array). If the field already exists it is checked and
    reused, so building transforms twice on one tree is harmless.
    """
    dtype = np.dtype(dtype)
    if isinstance(like, Array):
        batch_shape = tuple(like.batch_shape[:2])
    else:
        batch_shape = tuple(np.shape(like)[:2])
    shape = batch_shape + tuple(feature_shape)
    if key in sample_tree:
        existing = as_ndarray(sample_tree[key], key)
        if existing.shape != shape:
            raise ShapeError(
                f"existing field '{key}' has shape {existing.shape}, expected {shape}"
            )
        if existing.dtype != dtype:
            raise DtypeError(
                f"existing field '{key}' has dtype {existing.dtype}, expected {dtype}"
            )
        return sample_tree[key]
    leaf: Array | np.ndarray
    if isinstance(like, Array):
        leaf = Array(
            batch_shape=batch_shape,
            feature_shape=tuple(feature_shape),
            dtype=dtype,
            storage=like.storage,
        )
    else:
        leaf = np.zeros(shape, dtype=dtype)
    sample_tree[key] = leaf
    return leaf


class Transform:
    """Base class: an in-place operation on a finished ``[T, B]`` sample tree.

    Subclasses are built from an example sample tree: the constructor checks
    the fields the transform reads (a missing field or a bad shape/dtype raises
    a :mod:`parllel.errors` error naming it) and allocates the fields it
    writes. ``transform(sample_tree)`` then runs on every batch and returns the
    same tree. State (running statistics) goes through :meth:`state_dict` and
    :meth:`load_state_dict`.
    """

    def __call__(self, sample_tree: Any) -> Any:
        """Apply the transform in place and return ``sample_tree``."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Return the transform's state (empty for stateless transforms)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore state saved by :meth:`state_dict`."""
        if state:
            raise ConfigError(
                f"{type(self).__name__} is stateless but got state keys {list(state)}"
            )


class Compose(Transform):
    """Run several transforms in order, as one batch transform.

    Order matters: build (and run) the transforms in the order their fields
    depend on each other, e.g. valid mask, reward normalization, advantage
    estimation, advantage normalization. The state dict maps
    ``"{index}.{ClassName}"`` to each transform's state, so loading into a
    differently ordered pipeline fails loudly.

    Example:
        >>> pipeline = Compose([
        ...     ComputeValidMask(sample_tree),
        ...     EstimateAdvantage(sample_tree, gamma=0.99, gae_lambda=0.95),
        ...     NormalizeAdvantage(sample_tree, only_valid=True),
        ... ])
        >>> sample_tree = pipeline(sample_tree)
    """

    def __init__(self, transforms: Iterable[Transform]) -> None:
        self.transforms = list(transforms)
        for item in self.transforms:
            if not callable(item):
                raise ConfigError(f"Compose got a non-callable {item!r}")

    def _keys(self) -> list[str]:
        return [f"{i}.{type(t).__name__}" for i, t in enumerate(self.transforms)]

    def __call__(self, sample_tree: Any) -> Any:
        """Run every transform in order and return ``sample_tree``."""
        for transform in self.transforms:
            sample_tree = transform(sample_tree)
        return sample_tree

    def state_dict(self) -> dict[str, Any]:
        """Return ``{"{index}.{ClassName}": state}`` for every transform."""
        return {
            key: transform.state_dict() if hasattr(transform, "state_dict") else {}
            for key, transform in zip(self._keys(), self.transforms)
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore every transform's state; keys must match exactly."""
        keys = self._keys()
        if sorted(state) != sorted(keys):
            raise ConfigError(
                f"state dict keys {sorted(state)} do not match pipeline {keys}"
            )
        for key, transform in zip(keys, self.transforms):
            if hasattr(transform, "load_state_dict"):
                transform.load_state_dict(state[key])
