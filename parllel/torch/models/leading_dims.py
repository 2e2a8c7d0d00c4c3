"""Let models accept ``[F]``, ``[B, F]`` and ``[T, B, F]`` inputs alike.

A model calls :func:`infer_leading_dims` on its input, flattens the leading
dims to one ``[T * B, ...]`` dim (or views them as ``[T, B, ...]`` for a
recurrent core), computes, and calls :func:`restore_leading_dims` on its
outputs so they come back with the caller's leading dims.

Example:
    >>> x = torch.zeros(5, 3, 4)                    # [T, B, F]
    >>> leading = infer_leading_dims(x, feature_ndim=1)
    >>> y = net(flatten_leading_dims(x, leading))   # [T * B, out]
    >>> restore_leading_dims(y, leading).shape
    torch.Size([5, 3, out])
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from parllel.errors import ShapeError

__all__ = [
    "LeadingDims",
    "flatten_leading_dims",
    "infer_leading_dims",
    "restore_leading_dims",
]


class LeadingDims(NamedTuple):
    """How many leading dims an input had, and their sizes.

    Attributes:
        ndim: 0 (``[F]``), 1 (``[B, F]``) or 2 (``[T, B, F]``).
        T: time length (1 unless ``ndim == 2``).
        B: batch size (1 if ``ndim == 0``).
    """

    ndim: int
    T: int
    B: int


def infer_leading_dims(tensor: torch.Tensor, feature_ndim: int) -> LeadingDims:
    """Read the leading dims of ``tensor``, given how many trailing dims are features.

    Args:
        tensor: input of shape ``[F...]``, ``[B, F...]`` or ``[T, B, F...]``.
        feature_ndim: number of trailing feature dims (1 for vectors, 3 for
            images).

    Returns:
        The :class:`LeadingDims` of ``tensor``.

    Raises:
        ShapeError: if ``tensor`` has fewer than ``feature_ndim`` or more than
            ``feature_ndim + 2`` dims.
    """
    lead_ndim = tensor.dim() - feature_ndim
    if not 0 <= lead_ndim <= 2:
        raise ShapeError(
            f"expected a tensor with {feature_ndim} feature dims and 0, 1 or 2 "
            f"leading dims ([T, B]); got shape {tuple(tensor.shape)}"
        )
    shape = tensor.shape
    T = shape[0] if lead_ndim == 2 else 1
    B = shape[lead_ndim - 1] if lead_ndim >= 1 else 1
    return LeadingDims(lead_ndim, T, B)


def flatten_leading_dims(tensor: torch.Tensor, leading: LeadingDims) -> torch.Tensor:
    """View ``tensor``'s leading dims as one ``[T * B, ...]`` dim."""
    return tensor.reshape(leading.T * leading.B, *tensor.shape[leading.ndim :])


def restore_leading_dims(tensors: Any, leading: LeadingDims) -> Any:
    """Reshape outputs with a ``[T * B, ...]`` leading dim back to the caller's dims.

    Works on one tensor or on a nested tuple / NamedTuple / dict / list of
    them (e.g. distribution parameters); ``None`` passes through.

    Args:
        tensors: tensors whose first dim is ``T * B``.
        leading: the caller's :class:`LeadingDims`.

    Returns:
        The same structure with leading dims ``[]``, ``[B]`` or ``[T, B]``.
    """
    if tensors is None:
        return None
    if isinstance(tensors, torch.Tensor):
        T, B = leading.T, leading.B
        if tensors.dim() == 0 or tensors.shape[0] != T * B:
            raise ShapeError(
                f"expected an output with leading dim T * B = {T * B}; got shape "
                f"{tuple(tensors.shape)}"
            )
        rest = tensors.shape[1:]
        if leading.ndim == 2:
            return tensors.reshape(T, B, *rest)
        if leading.ndim == 1:
            return tensors.reshape(B, *rest)
        return tensors.reshape(rest)
    if isinstance(tensors, tuple) and hasattr(tensors, "_fields"):
        return type(tensors)(*(restore_leading_dims(t, leading) for t in tensors))
    if isinstance(tensors, (tuple, list)):
        return type(tensors)(restore_leading_dims(t, leading) for t in tensors)
    if isinstance(tensors, dict):
        return {k: restore_leading_dims(v, leading) for k, v in tensors.items()}
    raise TypeError(f"cannot restore leading dims of {type(tensors).__name__}")
