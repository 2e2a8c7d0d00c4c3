"""Optimizers the algorithms usually train with."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["adam"]


def adam(params: Any, learning_rate: float) -> torch.optim.Optimizer:
    """Adam, fused into one kernel per step where torch supports it (CPU, CUDA).

    ``params``: tensors or parameter groups (dicts), as for ``torch.optim.Adam``.

    Example:
        >>> dqn = DQN(agent, adam(agent.q_network.parameters(), learning_rate=1e-3))
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):  # e.g. a device without fused Adam
        return torch.optim.Adam(params, lr=learning_rate)
