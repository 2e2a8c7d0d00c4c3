"""The ``valid`` mask transform for wait-reset sampling."""

from __future__ import annotations

from typing import Any

import numpy as np

from parllel.errors import ShapeError
from parllel.fields import DONE, TERMINATED, TRUNCATED, VALID
from parllel.transforms.base import (
    Transform,
    allocate_field,
    as_ndarray,
    get_field,
    has_field,
)
from parllel.transforms.functional import valid_mask


class ComputeValidMask(Transform):
    """Write the wait-reset ``valid`` mask (``[T, B]`` bool).

    ``valid[0] = True`` and ``valid[t] = valid[t - 1] and not done[t - 1]``,
    with ``done = terminated or truncated`` (or the ``done`` field if the tree
    has no ``terminated``/``truncated``). The step that ends an episode is
    valid; the steps an env records after it, until the sampler resets it at
    the end of the batch, are not.

    Example:
        >>> ComputeValidMask(sample_tree)(sample_tree).valid[:, b]
    """

    def __init__(self, sample_tree: Any) -> None:
        self.from_done = not (
            has_field(sample_tree, TERMINATED) and has_field(sample_tree, TRUNCATED)
        )
        like = get_field(
            sample_tree,
            DONE if self.from_done else TERMINATED,
            "the valid mask needs terminated and truncated, or done",
        )
        shape = np.shape(as_ndarray(like, DONE if self.from_done else TERMINATED))
        if len(shape) != 2:
            raise ShapeError(f"episode-end flags must be [T, B], got shape {shape}")
        allocate_field(sample_tree, VALID, like, (), np.bool_)
        self(sample_tree)

    def __call__(self, sample_tree: Any) -> Any:
        """Compute ``valid`` in place."""
        out = as_ndarray(sample_tree[VALID], VALID)
        if self.from_done:
            valid_mask(as_ndarray(sample_tree[DONE], DONE), valid_out=out)
        else:
            valid_mask(
                as_ndarray(sample_tree[TERMINATED], TERMINATED),
                as_ndarray(sample_tree[TRUNCATED], TRUNCATED),
                valid_out=out,
            )
        return sample_tree
