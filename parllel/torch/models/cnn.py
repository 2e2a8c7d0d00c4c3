"""Convolutional encoder for image observations (Nature-DQN style by default)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from parllel.errors import ConfigError, ShapeError
from parllel.torch.models.dtypes import FollowsModelDtype

__all__ = ["CnnEncoder"]


class CnnEncoder(FollowsModelDtype):
    """Conv stack mapping images to flat features, keeping leading dims.

    Inputs are ``[..., C, H, W]`` (or ``[..., H, W, C]`` with
    ``channels_last=True``) with any number of leading dims; outputs are
    ``[..., output_size]``. ``uint8`` images are scaled to ``[0, 1]``; other
    images are used as they are; both in the model's dtype. The defaults are the Nature-DQN conv stack
    (32x8x8 stride 4, 64x4x4 stride 2, 64x3x3 stride 1, ReLU); pass
    ``output_size=512`` for its fully connected layer too. The flat feature
    size is inferred at construction by running a zero image through the
    stack, so ``output_size`` is always known.

    Example:
        >>> encoder = CnnEncoder((4, 84, 84))
        >>> encoder(torch.zeros(2, 4, 84, 84, dtype=torch.uint8)).shape
        torch.Size([2, 3136])

    Args:
        image_shape: shape of one image as stored: ``(C, H, W)``, or
            ``(H, W, C)`` if ``channels_last``.
        channels_last: whether images are stored channels-last.
        channels: output channels of each conv layer.
        kernel_sizes: kernel size of each conv layer.
        strides: stride of each conv layer.
        paddings: padding of each conv layer (zeros if None).
        activation: module class placed after every layer.
        output_size: if given, a linear layer (with activation) to this size
            follows the convs.
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
    ) -> None:
        super().__init__()
        image_shape = tuple(int(d) for d in image_shape)
        if len(image_shape) != 3:
            raise ConfigError(f"image_shape must have 3 dims; got {image_shape}")
        paddings = tuple(paddings) if paddings is not None else (0,) * len(channels)
        if not len(channels) == len(kernel_sizes) == len(strides) == len(paddings):
            raise ConfigError(
                "channels, kernel_sizes, strides and paddings must have equal "
                f"lengths; got {len(channels)}, {len(kernel_sizes)}, "
                f"{len(strides)}, {len(paddings)}"
            )
        self.image_shape = image_shape
        self.channels_last = channels_last
        in_channels = image_shape[-1] if channels_last else image_shape[0]
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
        chw = (
            (image_shape[2], image_shape[0], image_shape[1])
            if channels_last
            else image_shape
        )
        try:
            with torch.no_grad():
                example = self.convs(torch.zeros(1, *chw))  # [1, C', H', W']
        except RuntimeError as exc:
            raise ConfigError(
                f"images of shape {image_shape} are too small for this conv "
                f"stack (kernel_sizes={tuple(kernel_sizes)}, "
                f"strides={tuple(strides)}): {exc}"
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

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Encode ``[..., *image_shape]`` images into ``[..., output_size]``."""
        if tuple(images.shape[-3:]) != self.image_shape:
            raise ShapeError(
                f"CnnEncoder expects images [..., {', '.join(map(str, self.image_shape))}]"
                f"; got {tuple(images.shape)}"
            )
        leading = images.shape[:-3]
        x = images.reshape(-1, *self.image_shape)  # [N, *image_shape]
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)  # [N, C, H, W]
        dtype = self.dtype_reference.dtype
        if x.dtype == torch.uint8:
            x = x.to(dtype).mul_(1.0 / 255.0)
        elif x.dtype != dtype:
            x = x.to(dtype)
        features = self.linear(self.convs(x).flatten(1))  # [N, output_size]
        return features.reshape(*leading, self.output_size)
