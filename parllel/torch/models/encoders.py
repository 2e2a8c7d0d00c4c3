"""Observation encoders: vectors, discrete values, images and nested dicts.

Every encoder maps an observation with any leading dims ``[..., *feature]``
to flat features ``[..., output_size]`` and has an ``output_size`` attribute,
so models can stack anything after it. :func:`build_encoder` picks encoders
from a gymnasium space or an example observation.

Every encoder casts its input to the model's floating dtype (float32 unless
the model was converted), whatever the observation's dtype: see
:mod:`parllel.torch.models.dtypes`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from parllel.errors import ConfigError, ShapeError
from parllel.torch.models.cnn import CnnEncoder
from parllel.torch.models.dtypes import FollowsModelDtype, to_model_dtype

__all__ = [
    "DictEncoder",
    "FlattenEncoder",
    "OneHotEncoder",
    "build_encoder",
    "encoder_output_size",
    "is_image_shape",
]


def encoder_output_size(encoder: nn.Module) -> int:
    """The ``output_size`` of an encoder module, checked to be a positive int.

    Raises:
        ConfigError: the module has no integer ``output_size`` attribute.
    """
    size = getattr(encoder, "output_size", None)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ConfigError(
            f"encoder {type(encoder).__name__} needs a positive int attribute "
            f"output_size (the size of its flat features), got {size!r}"
        )
    return size


class FlattenEncoder(FollowsModelDtype):
    """Flatten the trailing ``feature_shape`` dims and cast to the model's dtype.

    Any input dtype (float64 from MuJoCo envs, integers, bools) becomes the
    model's floating dtype (float32 by default; it follows ``.to(dtype)``).
    No parameters.

    Example:
        >>> FlattenEncoder((2, 3))(torch.zeros(5, 2, 3)).shape
        torch.Size([5, 6])

    Args:
        feature_shape: shape of one observation (``()`` for a scalar).
    """

    def __init__(self, feature_shape: Sequence[int]) -> None:
        super().__init__()
        self.feature_shape = tuple(int(d) for d in feature_shape)
        self.output_size = math.prod(self.feature_shape)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[..., *feature_shape]`` to ``[..., output_size]`` in the model's dtype."""
        ndim = len(self.feature_shape)
        if tuple(observation.shape[observation.dim() - ndim :]) != self.feature_shape:
            raise ShapeError(
                f"expected observations [..., {self.feature_shape}]; got "
                f"{tuple(observation.shape)}"
            )
        leading = observation.shape[: observation.dim() - ndim]
        flat = observation.reshape(*leading, self.output_size)
        return to_model_dtype(flat, self.dtype_reference)


class OneHotEncoder(FollowsModelDtype):
    """One-hot encode integer observations (e.g. a ``Discrete`` space).

    Args:
        n: number of distinct values.
    """

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = int(n)
        self.output_size = self.n

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Integer ``[...]`` to ``[..., n]`` in the model's dtype."""
        one_hot = nn.functional.one_hot(observation.long(), self.n)
        return to_model_dtype(one_hot, self.dtype_reference)


class DictEncoder(nn.Module):
    """One encoder per key of a (nested) observation; features concatenated.

    The observation may be any mapping (dict, ArrayDict) or a tuple whose
    positions match the keys ``"0"``, ``"1"``, ...; nest DictEncoders for
    nested observations. Keys are encoded in the order given.

    Example:
        >>> encoder = DictEncoder({"pixels": CnnEncoder((3, 64, 64)),
        ...                        "joints": FlattenEncoder((7,))})
        >>> features = encoder({"pixels": pixels, "joints": joints})  # [..., F]

    Args:
        encoders: mapping from key to an encoder with an ``output_size``.
    """

    def __init__(self, encoders: Mapping[str, nn.Module]) -> None:
        super().__init__()
        if not encoders:
            raise ConfigError("DictEncoder needs at least one encoder")
        self.encoders = nn.ModuleDict(dict(encoders))
        self.output_size = sum(encoder_output_size(e) for e in self.encoders.values())

    def forward(self, observation: Any) -> torch.Tensor:
        """Encode every key and concatenate along the last dim."""
        sequence = isinstance(observation, (tuple, list))
        features = [
            encoder(observation[int(key)] if sequence else observation[key])
            for key, encoder in self.encoders.items()
        ]
        return torch.cat(features, dim=-1)  # [..., output_size]


def build_encoder(
    observation: Any,
    *,
    channels_last: bool | None = None,
    cnn_kwargs: Mapping[str, Any] | None = None,
) -> nn.Module:
    """Choose an encoder for an observation space or an example observation.

    Per leaf: 3-D or 4-D ``uint8`` arrays (images, frame stacks) and 2-D
    ``uint8`` of at least 32x32 get a :class:`CnnEncoder`, ``Discrete`` a
    :class:`OneHotEncoder`, anything else a :class:`FlattenEncoder`; Dict and
    Tuple spaces a :class:`DictEncoder`, recursively (see docs/torch.md,
    "Models").

    Args:
        observation: a ``gymnasium.Space``, or an example observation
            (ndarray, or nested mapping / tuple of them).
        channels_last: force the image layout instead of guessing it.
        cnn_kwargs: extra keyword arguments for every :class:`CnnEncoder`.

    Returns:
        An encoder module with an ``output_size`` attribute.

    Raises:
        ShapeError: an image-like leaf no encoder here places.
    """
    cnn_kwargs = dict(cnn_kwargs or {})
    recurse = lambda sub: build_encoder(  # noqa: E731
        sub, channels_last=channels_last, cnn_kwargs=cnn_kwargs
    )
    if isinstance(observation, gym.spaces.Dict) or isinstance(observation, Mapping):
        items = observation.items()
        return DictEncoder({str(k): recurse(v) for k, v in items})
    if isinstance(observation, gym.spaces.Tuple) or isinstance(
        observation, (tuple, list)
    ):
        return DictEncoder({str(i): recurse(v) for i, v in enumerate(observation)})
    if isinstance(observation, gym.spaces.Discrete):
        return OneHotEncoder(int(observation.n))
    if isinstance(observation, gym.spaces.Space):
        shape, dtype = observation.shape, observation.dtype
        if shape is None:
            raise ConfigError(f"cannot build an encoder for space {observation}")
    else:
        example = np.asarray(observation)
        shape, dtype = example.shape, example.dtype
    shape = tuple(int(d) for d in shape)
    if is_image_shape(shape, dtype):
        if len(shape) == 2:
            last = False
        elif channels_last is not None:
            last = channels_last
        else:
            last = shape[-1] < shape[-3]
        return CnnEncoder(shape, channels_last=last, **cnn_kwargs)
    _refuse_image_like(shape, dtype)
    return FlattenEncoder(shape)


_MIN_IMAGE_SIDE = 32
"""the smallest height and width a 2-D uint8 array is taken as a frame at"""


def is_image_shape(shape: Sequence[int], dtype: Any) -> bool:
    """Whether :func:`build_encoder` gives a leaf of this shape and dtype a CNN.

    ``uint8`` with 3 or 4 dims, or 2 dims of at least 32 each.
    """
    if dtype is None or np.dtype(dtype) != np.uint8:
        return False
    if len(shape) in (3, 4):
        return True
    return len(shape) == 2 and min(shape) >= _MIN_IMAGE_SIDE


def _refuse_image_like(shape: tuple[int, ...], dtype: Any) -> None:
    """Raise for an image-like leaf that no encoder here places."""
    large = sum(d >= _MIN_IMAGE_SIDE for d in shape)
    if dtype is not None and np.dtype(dtype) == np.uint8 and len(shape) > 4:
        raise ShapeError(
            f"observation of shape {shape} (uint8) looks like images, but the "
            f"CNN encoder takes (H, W), (C, H, W), (H, W, C) or frame stacks "
            f"(k, C, H, W) / (k, H, W, C); reshape it to one of these (e.g. "
            f"join the stacking axes) or build the encoder yourself"
        )
    if len(shape) >= 3 and large >= 2:
        raise ShapeError(
            f"observation of shape {shape} ({np.dtype(dtype)}) looks like "
            f"images, but only uint8 images get a CNN encoder, and flattening "
            f"it would feed {math.prod(shape)} inputs to a linear layer; store "
            f"the frames as uint8 (0-255; the CNN scales them by 1/255), or "
            f"build the encoder yourself (CnnEncoder, FlattenEncoder) and an "
            f"ActorCriticModel from it"
        )
