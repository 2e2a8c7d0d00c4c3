"""Convolutional encoder for image observations (Nature-DQN style by default)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from parllel.errors import ConfigError, ShapeError
from parllel.torch.models.dtypes import FollowsModelDtype

__all__ = ["NATURE_CNN", "CnnEncoder"]

NATURE_CNN: dict[str, Any] = dict(
    channels=(32, 64, 64), kernel_sizes=(8, 4, 3), strides=(4, 2, 1), output_size=512
)
"""The Nature-DQN encoder (Mnih et al. 2015) every Atari PPO/DQN uses: three
ReLU convs then a 512-unit ReLU layer; the image default of
:func:`~parllel.torch.models.build_actor_critic` and
:func:`~parllel.torch.agents.build_dqn_agent` (their ``cnn=`` updates it)."""


class CnnEncoder(FollowsModelDtype):
    """Conv stack mapping images to flat features, keeping leading dims.

    Inputs are ``[..., C, H, W]`` (``[..., H, W, C]`` with ``channels_last``),
    one-channel frames ``[..., H, W]`` or frame stacks ``[..., k, C, H, W]``
    (joined into ``k * C`` channels); ``uint8`` images are scaled to
    ``[0, 1]``. The defaults are the Nature-DQN conv stack; ``output_size=512``
    adds its dense layer. The flat size is inferred at construction.

    Example:
        >>> encoder = CnnEncoder((4, 84, 84))
        >>> encoder(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape
        torch.Size([2, 3136])

    Args:
        image_shape: one image as stored: ``(C, H, W)`` (or channels-last),
            ``(H, W)``, or a frame stack ``(k, C, H, W)``.
        channels: output channels of each conv layer (``kernel_sizes``,
            ``strides`` and ``paddings`` likewise per layer).
        activation: module class placed after every layer.
        output_size: if given, a linear layer (with activation) to this size.
        init_scale: if given, orthogonal weights with this gain and zero biases;
            otherwise torch's default initialization.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        *,
        channels_last: bool = False,
        channels: Sequence[int] = (32, 64, 64),
        kernel_sizes: Sequence[int] = (8, 4, 3),
        strides: Sequence[int] = (4, 2, 1),
        paddings: Sequence[int] | None = None,
        activation: Callable[[], nn.Module] = nn.ReLU,
        output_size: int | None = None,
        init_scale: float | None = None,
    ) -> None:
        super().__init__()
        image_shape = tuple(int(d) for d in image_shape)
        if len(image_shape) not in (2, 3, 4):
            raise ConfigError(
                f"image_shape must be (H, W), (C, H, W) / (H, W, C) or a frame "
                f"stack (k, C, H, W) / (k, H, W, C); got {image_shape}"
            )
        paddings = tuple(paddings) if paddings is not None else (0,) * len(channels)
        if not len(channels) == len(kernel_sizes) == len(strides) == len(paddings):
            raise ConfigError(
                "channels, kernel_sizes, strides and paddings must have equal "
                f"lengths; got {len(channels)}, {len(kernel_sizes)}, "
                f"{len(strides)}, {len(paddings)}"
            )
        self.image_shape = image_shape
        self.channels_last = channels_last
        chw = _chw_shape(image_shape, channels_last)
        in_channels = chw[0]
        layers: list[nn.Module] = []
        for out_channels, kernel, stride, pad in zip(
            channels, kernel_sizes, strides, paddings
        ):
            layers += [
                nn.Conv2d(in_channels, out_channels, kernel, stride, pad),
                activation(),
            ]
            in_channels = out_channels
        self.convs = nn.Sequential(*layers)
        try:
            with torch.no_grad():
                example = self.convs(torch.zeros(1, *chw))  # [1, C', H', W']
        except RuntimeError as exc:
            raise ConfigError(
                f"images of shape {image_shape} are too small for this conv "
                f"stack (kernel_sizes={tuple(kernel_sizes)}, "
                f"strides={tuple(strides)}): {exc}; pass smaller kernel_sizes "
                f"and strides (build_actor_critic(cnn=dict(...)))"
            ) from None
        conv_size = example[0].numel()
        if output_size is not None:
            self.linear: nn.Module = nn.Sequential(
                nn.Linear(conv_size, output_size), activation()
            )
            self.output_size = int(output_size)
        else:
            self.linear = nn.Identity()
            self.output_size = conv_size
        if init_scale is not None:
            for module in self.modules():
                if isinstance(module, (nn.Conv2d, nn.Linear)):
                    nn.init.orthogonal_(module.weight, gain=init_scale)
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Encode ``[..., *image_shape]`` images into ``[..., output_size]``."""
        ndim = len(self.image_shape)
        if tuple(images.shape[images.dim() - ndim :]) != self.image_shape:
            raise ShapeError(
                f"CnnEncoder expects images [..., {', '.join(map(str, self.image_shape))}]"
                f"; got {tuple(images.shape)}"
            )
        leading = images.shape[: images.dim() - ndim]
        x = images.reshape(-1, *self.image_shape)  # [N, *image_shape]
        if ndim == 2:
            x = x.unsqueeze(1)  # [N, 1, H, W]
        elif ndim == 3 and self.channels_last:
            x = x.permute(0, 3, 1, 2)  # [N, C, H, W]
        elif ndim == 4:
            if self.channels_last:
                x = x.permute(0, 1, 4, 2, 3)  # [N, k, C, H, W]
            x = x.reshape(x.shape[0], -1, *x.shape[-2:])  # [N, k * C, H, W]
        dtype = self.dtype_reference.dtype
        if x.dtype == torch.uint8:
            x = x.to(dtype).mul_(1.0 / 255.0)
        elif x.dtype != dtype:
            x = x.to(dtype)
        features = self.linear(self.convs(x).flatten(1))  # [N, output_size]
        return features.reshape(*leading, self.output_size)


def _chw_shape(image_shape: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    """The ``(C, H, W)`` the convs see for one stored image of ``image_shape``."""
    if len(image_shape) == 2:
        return (1, *image_shape)
    if len(image_shape) == 3:
        if channels_last:
            return (image_shape[2], image_shape[0], image_shape[1])
        return image_shape
    k = image_shape[0]
    if channels_last:
        return (k * image_shape[3], image_shape[1], image_shape[2])
    return (k * image_shape[1], image_shape[2], image_shape[3])
