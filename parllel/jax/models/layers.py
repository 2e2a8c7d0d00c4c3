"""Dense and conv layers with torch's default initialization and parllel's names.

Flax's ``Dense`` initializes kernels with LeCun-normal and biases with zeros;
torch's ``nn.Linear`` and ``nn.Conv2d`` draw both from
``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``. :func:`dense` and :func:`conv` give
torch's scheme by default and orthogonal weights with a gain (zero biases)
when asked, so a JAX model starts where the torch builders' would.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

__all__ = ["conv", "dense", "torch_default_init"]


def torch_default_init(fan_in: int) -> Any:
    """Initializer of ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (torch's Linear/Conv2d)."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> Any:
        return jax.random.uniform(key, tuple(shape), dtype, -bound, bound)

    return init


def dense(
    features: int,
    fan_in: int,
    init_scale: float | None,
    name: str,
    param_dtype: Any = jnp.float32,
) -> nn.Dense:
    """A Dense layer: orthogonal with gain ``init_scale`` and zero bias, or
    torch's default initialization if ``init_scale`` is None."""
    if init_scale is None:
        kernel_init = bias_init = torch_default_init(fan_in)
    else:
        kernel_init = nn.initializers.orthogonal(scale=init_scale)
        bias_init = nn.initializers.zeros
    return nn.Dense(
        features,
        kernel_init=kernel_init,
        bias_init=bias_init,
        param_dtype=param_dtype,
        dtype=param_dtype,
        name=name,
    )


def conv(
    features: int,
    kernel_size: int,
    stride: int,
    padding: int,
    in_channels: int,
    init_scale: float | None,
    name: str,
    param_dtype: Any = jnp.float32,
) -> nn.Conv:
    """A 2-D convolution over ``[N, H, W, C]``, initialized as :func:`dense`."""
    if init_scale is None:
        kernel_init = bias_init = torch_default_init(
            in_channels * kernel_size * kernel_size
        )
    else:
        kernel_init = nn.initializers.orthogonal(scale=init_scale)
        bias_init = nn.initializers.zeros
    return nn.Conv(
        features,
        (kernel_size, kernel_size),
        strides=(stride, stride),
        padding=[(padding, padding), (padding, padding)],
        kernel_init=kernel_init,
        bias_init=bias_init,
        param_dtype=param_dtype,
        dtype=param_dtype,
        name=name,
    )
