"""SAC's set-up: the entropy coefficient (alpha), the optimizer SAC usually
trains with, and the checks of both."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from parllel.errors import ConfigError
from parllel.torch.algos.optimizers import adam
from parllel.validation import check_positive

__all__ = ["EntropyCoefficient", "build_sac_optimizer"]


class EntropyCoefficient(nn.Module):
    """The entropy coefficient alpha of SAC, kept as ``log_alpha``.

    Learned (``learn=True``, tuned by :class:`~parllel.torch.algos.SAC`
    towards its target entropy: put :meth:`parameters` in SAC's optimizer) or
    fixed. Move it with ``.to(device)`` together with the agent.

    Example:
        >>> alpha = EntropyCoefficient(1.0)  # learned, starts at 1
        >>> alpha.value
        1.0

    Args:
        initial: alpha at the start (positive).
        learn: tune alpha (its ``log_alpha`` requires gradients).

    Raises:
        ConfigError: ``initial`` is not positive and finite.
    """

    def __init__(self, initial: float = 1.0, *, learn: bool = True) -> None:
        super().__init__()
        check_positive("initial alpha", initial)
        self.log_alpha = nn.Parameter(
            torch.tensor(math.log(initial)), requires_grad=learn
        )

    @property
    def learnable(self) -> bool:
        """Whether SAC tunes alpha."""
        return self.log_alpha.requires_grad

    @property
    def value(self) -> float:
        """The current alpha."""
        return float(self.log_alpha.detach().exp())

    def forward(self) -> torch.Tensor:
        """``exp(log_alpha)`` as a tensor (with gradient when learnable)."""
        return self.log_alpha.exp()


def build_sac_optimizer(
    agent: Any, alpha: EntropyCoefficient | None, learning_rate: float = 3e-4
) -> torch.optim.Optimizer:
    """One Adam (fused where torch supports it) over SAC's actor, critic and alpha.

    One parameter group each (actor, critic, then alpha if it is learned), so
    one optimizer step per update serves all three losses.

    Example:
        >>> alpha = EntropyCoefficient(1.0)
        >>> sac = SAC(agent, build_sac_optimizer(agent, alpha, 3e-4), alpha)

    Args:
        agent: an agent with ``actor`` and ``critic`` modules.
        alpha: the entropy coefficient (None, or a fixed one: no group).
        learning_rate: of every group.

    Raises:
        ConfigError: ``learning_rate`` is not positive and finite.
    """
    check_positive("learning_rate", learning_rate)
    groups = [list(agent.actor.parameters()), list(agent.critic.parameters())]
    if alpha is not None and alpha.learnable:
        groups.append([alpha.log_alpha])
    return adam([{"params": group} for group in groups], learning_rate)


def check_alpha(
    alpha: EntropyCoefficient | float | None, device: torch.device
) -> EntropyCoefficient:
    """``alpha`` as an :class:`EntropyCoefficient` on ``device`` (a float: fixed).

    Raises:
        TypeError: ``alpha`` is missing.
        ConfigError: an :class:`EntropyCoefficient` on another device.
    """
    if alpha is None:
        raise TypeError(
            "SAC() missing required argument: 'alpha' (an EntropyCoefficient, "
            "or a float for a fixed alpha)"
        )
    if not isinstance(alpha, EntropyCoefficient):
        return EntropyCoefficient(float(alpha), learn=False).to(device)
    if alpha.log_alpha.device != device:
        raise ConfigError(
            f"alpha is on {alpha.log_alpha.device}, the critic on {device}: move "
            "it with alpha.to(device)"
        )
    return alpha


def check_sac_optimizer(optimizer: Any, agent: Any, alpha: EntropyCoefficient) -> None:
    """Raise :class:`~parllel.errors.ConfigError` unless ``optimizer`` is an
    optimizer holding every parameter of the actor, the critic and a learned alpha."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(
            f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}"
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    parts = [("agent.actor", agent.actor), ("agent.critic", agent.critic)]
    if alpha.learnable:
        parts.append(("alpha", alpha))
    missing = [
        name
        for name, module in parts
        if any(id(p) not in held for p in module.parameters())
    ]
    if missing:
        raise ConfigError(
            f"the optimizer misses parameters of {', '.join(missing)}; build it with "
            "build_sac_optimizer(agent, alpha, learning_rate), or give it every "
            "parameter of the actor, the critic and a learned alpha"
        )
