"""Categorical distribution over discrete actions."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from parllel.errors import ConfigError, ShapeError
from parllel.torch.distributions.base import DistParams

__all__ = ["Categorical"]


class Categorical:
    """Categorical distribution parameterized by logits.

    Actions are integer tensors ``[...]`` for logits ``[..., num_actions]``.

    Example:
        >>> dist = Categorical(num_actions=3)
        >>> params = DistParams(logits=torch.zeros(8, 3))   # [B, num_actions]
        >>> dist.sample(params).shape, dist.entropy(params)[0]
        (torch.Size([8]), tensor(1.0986))

    Args:
        num_actions: number of discrete actions.
    """

    def __init__(self, num_actions: int) -> None:
        if num_actions < 1:
            raise ConfigError(f"num_actions must be >= 1, got {num_actions}")
        self.num_actions = int(num_actions)

    def _log_probs(self, dist_params: DistParams) -> torch.Tensor:
        logits = dist_params.logits
        if logits.shape[-1] != self.num_actions:
            raise ShapeError(
                f"expected logits [..., {self.num_actions}]; got {tuple(logits.shape)}"
            )
        return F.log_softmax(logits, dim=-1)

    def sample(self, dist_params: DistParams) -> torch.Tensor:
        """Sample actions ``[...]`` (int64) from ``logits [..., num_actions]``.

        Gumbel-max: ``argmax(logits + Gumbel noise)`` is an exact sample and
        about twice as fast as ``torch.multinomial`` for sampler-sized batches.
        """
        with torch.no_grad():
            logits = dist_params.logits
            uniform = torch.rand_like(logits).clamp_(min=torch.finfo(logits.dtype).tiny)
            return (logits - torch.log(-torch.log(uniform))).argmax(dim=-1)

    def deterministic(self, dist_params: DistParams) -> torch.Tensor:
        """The most likely action ``[...]``."""
        return dist_params.logits.argmax(dim=-1)

    def log_likelihood(self, x: torch.Tensor, dist_params: DistParams) -> torch.Tensor:
        """``log p(x)`` for integer actions ``x [...]``."""
        log_probs = self._log_probs(dist_params)
        index = x.long().unsqueeze(-1)  # [..., 1]
        return log_probs.gather(-1, index).squeeze(-1)

    def entropy(self, dist_params: DistParams) -> torch.Tensor:
        """``-sum p log p`` over actions, ``[...]``."""
        log_probs = self._log_probs(dist_params)
        return -(log_probs.exp() * log_probs).sum(dim=-1)

    def kl(self, old_params: DistParams, new_params: DistParams) -> torch.Tensor:
        """``KL(old || new) = sum p_old (log p_old - log p_new)``, ``[...]``."""
        old_log_probs = self._log_probs(old_params)
        new_log_probs = self._log_probs(new_params)
        return (old_log_probs.exp() * (old_log_probs - new_log_probs)).sum(dim=-1)
