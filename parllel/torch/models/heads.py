"""Output heads: distribution parameters and state values from features."""

from __future__ import annotations

import torch
from torch import nn

from parllel.torch.distributions.base import DistParams, GaussianParams
from parllel.validation import check_at_least

__all__ = ["CategoricalHead", "GaussianHead", "ValueHead"]


def _linear(input_size: int, output_size: int, init_scale: float) -> nn.Linear:
    layer = nn.Linear(input_size, output_size)
    nn.init.orthogonal_(layer.weight, gain=init_scale)
    nn.init.zeros_(layer.bias)
    return layer


class CategoricalHead(nn.Module):
    """Linear layer to ``DistParams(logits [..., num_actions])``.

    Args:
        input_size: feature size.
        num_actions: number of discrete actions.
        init_scale: orthogonal gain of the layer (small: near-uniform start).
    """

    def __init__(self, input_size: int, num_actions: int, init_scale: float = 0.01):
        super().__init__()
        self.linear = _linear(input_size, num_actions, init_scale)

    def forward(self, features: torch.Tensor) -> DistParams:
        """``[..., input_size]`` to logits ``[..., num_actions]``."""
        return DistParams(logits=self.linear(features))


class GaussianHead(nn.Module):
    """Linear layer to ``GaussianParams(mean, log_std)``.

    With ``state_dependent_std=False`` (the PPO default) ``log_std`` is one
    learned parameter ``[action_dim]`` shared by all states and expanded to
    the mean's shape; with ``True`` the layer also outputs ``log_std`` per
    state (SAC-style). Clipping ``log_std`` is the distribution's job (see
    :class:`~parllel.torch.distributions.Gaussian`).

    Args:
        input_size: feature size.
        action_dim: size of the action vector.
        state_dependent_std: whether ``log_std`` is computed from features.
        init_log_std: initial ``log_std`` of the state-independent parameter
            (or the bias of the state-dependent output).
        init_scale: orthogonal gain of the mean layer.
    """

    def __init__(
        self,
        input_size: int,
        action_dim: int,
        state_dependent_std: bool = False,
        init_log_std: float = 0.0,
        init_scale: float = 0.01,
    ) -> None:
        super().__init__()
        check_at_least("action_dim", action_dim)
        self.action_dim = action_dim
        self.state_dependent_std = state_dependent_std
        self.mean = _linear(input_size, action_dim, init_scale)
        if state_dependent_std:
            self.log_std_layer = _linear(input_size, action_dim, init_scale)
            nn.init.constant_(self.log_std_layer.bias, init_log_std)
        else:
            self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, features: torch.Tensor) -> GaussianParams:
        """``[..., input_size]`` to mean and log_std ``[..., action_dim]``."""
        mean = self.mean(features)  # [..., action_dim]
        if self.state_dependent_std:
            log_std = self.log_std_layer(features)
        else:
            log_std = self.log_std.expand_as(mean)
        return GaussianParams(mean=mean, log_std=log_std)


class ValueHead(nn.Module):
    """Linear layer to a scalar value per state, ``[...]``.

    Args:
        input_size: feature size.
        init_scale: orthogonal gain of the layer.
    """

    def __init__(self, input_size: int, init_scale: float = 1.0) -> None:
        super().__init__()
        self.linear = _linear(input_size, 1, init_scale)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``[..., input_size]`` to ``[...]``."""
        return self.linear(features).squeeze(-1)
