"""Masked means, advantage normalization and explained variance (jittable)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

__all__ = ["explained_variance", "masked_mean", "normalized_advantage"]


def masked_mean(x: Any, mask: Any) -> Any:
    if mask is None:
        return x.mean()
    total = jnp.where(mask, x, jnp.zeros((), x.dtype))
    return total.sum() / jnp.maximum(mask.sum(), 1).astype(x.dtype)


def normalized_advantage(advantage: Any, mask: Any) -> Any:
    """``(a - mean) / (std + 1e-8)`` over the valid entries, with the sample
    std (``ddof=1``, torch's ``.std()``); fewer than two entries stay as they are."""
    n = (
        jnp.asarray(advantage.size, advantage.dtype)
        if mask is None
        else mask.sum().astype(advantage.dtype)
    )
    mean = masked_mean(advantage, mask)
    bessel = n / jnp.maximum(n - 1, 1)
    std = jnp.sqrt(masked_mean((advantage - mean) ** 2, mask) * bessel)
    return jnp.where(n > 1, (advantage - mean) / (std + 1e-8), advantage)


def explained_variance(prediction: Any, target: Any, mask: Any) -> Any:
    """``1 - Var(target - prediction) / Var(target)`` (n-1 variances; NaN if
    the target is constant or has fewer than two entries)."""
    if mask is None:
        mask = jnp.ones(target.shape, bool)
    n = mask.sum()

    def var(x: Any) -> Any:
        mean = jnp.where(mask, x, 0).sum() / jnp.maximum(n, 1)
        return jnp.where(mask, (x - mean) ** 2, 0).sum() / jnp.maximum(n - 1, 1)

    target_var = var(target)
    ratio = 1.0 - var(target - prediction) / target_var
    return jnp.where((n >= 2) & (target_var > 0), ratio, jnp.nan)
