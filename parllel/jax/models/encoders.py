"""Observation encoders (flax.linen): vectors, discrete values, images, dicts.

Each maps an observation with any leading dims ``[..., *feature]`` to flat
features ``[..., F]`` in the model's dtype, as the torch encoders do
(``uint8`` images scaled by 1/255). :func:`build_encoder` picks them from a
gymnasium space with the torch :func:`~parllel.torch.models.encoders.build_encoder`'s
rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from parllel.errors import ConfigError, ShapeError
from parllel.jax.models.layers import conv, dense

__all__ = [
    "NATURE_CNN",
    "CnnEncoder",
    "DictEncoder",
    "FlattenEncoder",
    "OneHotEncoder",
    "build_encoder",
]

NATURE_CNN: dict[str, Any] = dict(
    channels=(32, 64, 64), kernel_sizes=(8, 4, 3), strides=(4, 2, 1), output_size=512
)
"""The Nature-DQN encoder settings, as :data:`parllel.torch.models.cnn.NATURE_CNN`."""


class FlattenEncoder(nn.Module):
    """Flatten the trailing ``feature_shape`` dims and cast to ``param_dtype``.

    Attributes:
        feature_shape: shape of one observation (``()`` for a scalar).
        param_dtype: the model's floating dtype.
    """

    feature_shape: tuple[int, ...]
    param_dtype: Any = jnp.float32

    def __call__(self, observation: Any) -> Any:
        """``[..., *feature_shape]`` to ``[..., prod(feature_shape)]``."""
        ndim = len(self.feature_shape)
        shape = tuple(observation.shape)
        if shape[len(shape) - ndim :] != tuple(self.feature_shape):
            raise ShapeError(
                f"expected observations [..., {self.feature_shape}]; got {shape}"
            )
        leading = shape[: len(shape) - ndim]
        flat = jnp.reshape(observation, (*leading, math.prod(self.feature_shape)))
        return flat.astype(self.param_dtype)


class OneHotEncoder(nn.Module):
    """One-hot encode integer observations ``[...]`` to ``[..., n]``.

    Attributes:
        n: number of distinct values.
        param_dtype: the model's floating dtype.
    """

    n: int
    param_dtype: Any = jnp.float32

    def __call__(self, observation: Any) -> Any:
        """Integer ``[...]`` to ``[..., n]``."""
        return nn.one_hot(observation, self.n, dtype=self.param_dtype)


class CnnEncoder(nn.Module):
    """Conv stack to flat features, with the torch ``CnnEncoder``'s layouts.

    Stored images are ``(C, H, W)`` (or ``(H, W, C)`` with
    ``channels_last``), ``(H, W)``, or frame stacks ``(k, C, H, W)`` /
    ``(k, H, W, C)`` whose frames join into ``k * C`` channels. The convs run
    channels-last (XLA's layout) and the features are flattened in torch's
    ``(C, H, W)`` order, so weights converted from a torch model give the
    same outputs.

    Attributes:
        image_shape: shape of one stored image.
        channels_last: whether images (or each frame) are channels-last.
        channels, kernel_sizes, strides: per conv layer.
        paddings: per conv layer (zeros if None).
        output_size: a ReLU dense layer to this size after the convs (None:
            convs only).
        init_scale: orthogonal gain of every layer; None: torch's default.
        activation: applied after every layer.
        param_dtype: the model's floating dtype.
    """

    image_shape: tuple[int, ...]
    channels_last: bool = False
    channels: Sequence[int] = (32, 64, 64)
    kernel_sizes: Sequence[int] = (8, 4, 3)
    strides: Sequence[int] = (4, 2, 1)
    paddings: Sequence[int] | None = None
    output_size: int | None = None
    init_scale: float | None = None
    activation: Callable[[Any], Any] = nn.relu
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, images: Any) -> Any:
        """``[..., *image_shape]`` to ``[..., F]``."""
        image_shape = tuple(self.image_shape)
        ndim = len(image_shape)
        shape = tuple(images.shape)
        if shape[len(shape) - ndim :] != image_shape:
            raise ShapeError(
                f"CnnEncoder expects images [..., {', '.join(map(str, image_shape))}]"
                f"; got {shape}"
            )
        leading = shape[: len(shape) - ndim]
        x = jnp.reshape(images, (-1, *image_shape))
        if ndim == 2:
            x = x[..., None]  # [N, H, W, 1]
        elif ndim == 3 and not self.channels_last:
            x = jnp.transpose(x, (0, 2, 3, 1))  # [N, H, W, C]
        elif ndim == 4:
            if not self.channels_last:
                x = jnp.transpose(x, (0, 1, 3, 4, 2))  # [N, k, H, W, C]
            x = jnp.transpose(x, (0, 2, 3, 1, 4))  # [N, H, W, k, C]
            x = jnp.reshape(x, (*x.shape[:3], -1))  # [N, H, W, k * C]
        if x.dtype == jnp.uint8:
            x = x.astype(self.param_dtype) * (1.0 / 255.0)
        else:
            x = x.astype(self.param_dtype)
        paddings = tuple(self.paddings or (0,) * len(self.channels))
        for index, (out, kernel, stride, pad) in enumerate(
            zip(self.channels, self.kernel_sizes, self.strides, paddings)
        ):
            layer = conv(
                int(out),
                int(kernel),
                int(stride),
                int(pad),
                x.shape[-1],
                self.init_scale,
                f"convs_{2 * index}",
                self.param_dtype,
            )
            x = self.activation(layer(x))
        x = jnp.transpose(x, (0, 3, 1, 2))  # torch's flatten order (C, H, W)
        x = jnp.reshape(x, (x.shape[0], -1))
        if self.output_size is not None:
            linear = dense(
                int(self.output_size),
                x.shape[-1],
                self.init_scale,
                "linear_0",
                self.param_dtype,
            )
            x = self.activation(linear(x))
        return jnp.reshape(x, (*leading, x.shape[-1]))


class DictEncoder(nn.Module):
    """One encoder per key of a dict (or tuple: keys ``"0"``, ``"1"``, ...)
    observation; features concatenated in the order given.

    Attributes:
        encoders: ``{key: encoder}``.
    """

    encoders: Mapping[str, nn.Module]

    def __call__(self, observation: Any) -> Any:
        """Encode every key and concatenate along the last dim."""
        sequence = isinstance(observation, (tuple, list))
        features = [
            encoder(observation[int(key)] if sequence else observation[key])
            for key, encoder in self.encoders.items()
        ]
        return jnp.concatenate(features, axis=-1)


_MIN_IMAGE_SIDE = 32


def _is_image_shape(shape: Sequence[int], dtype: Any) -> bool:
    if dtype is None or np.dtype(dtype) != np.uint8:
        return False
    if len(shape) in (3, 4):
        return True
    return len(shape) == 2 and min(shape) >= _MIN_IMAGE_SIDE


def build_encoder(
    observation: Any,
    *,
    channels_last: bool | None = None,
    cnn_kwargs: Mapping[str, Any] | None = None,
    param_dtype: Any = jnp.float32,
) -> nn.Module:
    """Choose an encoder for an observation space (or example), per leaf.

    The rules of the torch ``build_encoder``: ``uint8`` arrays of 3 or 4
    dims (or 2 dims of at least 32x32) are images (:class:`CnnEncoder`,
    channels-last guessed when the last dim is smaller than the height);
    ``Discrete`` is one-hot; anything else is flattened; dicts and tuples
    get a :class:`DictEncoder`.

    Raises:
        ConfigError: a space without a shape.
    """
    cnn_kwargs = dict(cnn_kwargs or {})

    def recurse(sub: Any) -> nn.Module:
        return build_encoder(
            sub,
            channels_last=channels_last,
            cnn_kwargs=cnn_kwargs,
            param_dtype=param_dtype,
        )

    if isinstance(observation, (gym.spaces.Dict, Mapping)):
        return DictEncoder({str(k): recurse(v) for k, v in observation.items()})
    if isinstance(observation, (gym.spaces.Tuple, tuple, list)):
        return DictEncoder({str(i): recurse(v) for i, v in enumerate(observation)})
    if isinstance(observation, gym.spaces.Discrete):
        return OneHotEncoder(int(observation.n), param_dtype=param_dtype)
    if isinstance(observation, gym.spaces.Space):
        if observation.shape is None:
            raise ConfigError(f"cannot build an encoder for space {observation}")
        shape, dtype = tuple(observation.shape), observation.dtype
    else:
        example = np.asarray(observation)
        shape, dtype = example.shape, example.dtype
    shape = tuple(int(d) for d in shape)
    if _is_image_shape(shape, dtype):
        if len(shape) == 2:
            last = False
        elif channels_last is not None:
            last = channels_last
        else:
            last = shape[-1] < shape[-3]
        return CnnEncoder(
            shape, channels_last=last, param_dtype=param_dtype, **cnn_kwargs
        )
    return FlattenEncoder(shape, param_dtype=param_dtype)


def is_image_encoder(encoder: nn.Module) -> bool:
    """Whether ``encoder`` is (or holds) a :class:`CnnEncoder`."""
    if isinstance(encoder, CnnEncoder):
        return True
    if isinstance(encoder, DictEncoder):
        return any(is_image_encoder(e) for e in encoder.encoders.values())
    return False
