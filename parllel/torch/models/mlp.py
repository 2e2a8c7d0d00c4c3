"""Multi-layer perceptron."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from parllel.errors import ConfigError

__all__ = ["MLP"]


class MLP(nn.Module):
    """Fully connected layers with an activation between them.

    Maps ``[..., input_size]`` to ``[..., output_size]``, keeping leading dims.
    Without ``output_size`` the last hidden layer (activated) is the output (a
    trunk); with it, a final linear layer without activation is added (a head).

    Example:
        >>> mlp = MLP(4, hidden_sizes=(64, 64), output_size=2, output_init_scale=0.01)
        >>> mlp(torch.zeros(8, 4)).shape
        torch.Size([8, 2])

    Args:
        activation: module class (or factory) placed after each hidden layer.
        output_init_scale: if given, orthogonal output weights with this gain
            and zero bias (0.01: a near-uniform initial policy).
        hidden_init_scale: if given, orthogonal hidden weights with this gain
            (SB3's and CleanRL's ``sqrt(2)``); else torch's default.
    """

    def __init__(
        self,
        input_size: int,
        hidden_sizes: Sequence[int] = (),
        output_size: int | None = None,
        activation: Callable[[], nn.Module] = nn.Tanh,
        output_init_scale: float | None = None,
        hidden_init_scale: float | None = None,
    ) -> None:
        super().__init__()
        sizes = [int(input_size), *(int(h) for h in hidden_sizes)]
        if any(size <= 0 for size in sizes) or (
            output_size is not None and output_size <= 0
        ):
            raise ConfigError(
                f"MLP sizes must be positive: input_size={input_size}, "
                f"hidden_sizes={tuple(hidden_sizes)}, output_size={output_size}"
            )
        layers: list[nn.Module] = []
        for in_size, out_size in zip(sizes[:-1], sizes[1:]):
            hidden = nn.Linear(in_size, out_size)
            if hidden_init_scale is not None:
                nn.init.orthogonal_(hidden.weight, gain=hidden_init_scale)
                nn.init.zeros_(hidden.bias)
            layers += [hidden, activation()]
        if output_size is not None:
            last = nn.Linear(sizes[-1], output_size)
            if output_init_scale is not None:
                nn.init.orthogonal_(last.weight, gain=output_init_scale)
                nn.init.zeros_(last.bias)
            layers.append(last)
        elif output_init_scale is not None:
            raise ConfigError("output_init_scale needs an output_size")
        self.layers = nn.Sequential(*layers)
        self.input_size = sizes[0]
        self.output_size = int(output_size) if output_size is not None else sizes[-1]

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """Apply the layers: ``[..., input_size]`` to ``[..., output_size]``."""
        return self.layers(inputs)
