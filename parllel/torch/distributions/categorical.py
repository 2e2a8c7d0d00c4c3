"""Categorical distribution over discrete actions, with optional action masks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from parllel.errors import ConfigError, ShapeError
from parllel.torch.distributions.base import DistParams
from parllel.validation import check_at_least

__all__ = ["ACTION_MASK", "Categorical", "action_mask_of", "masked_dist_params"]

ACTION_MASK = "action_mask"
"""Key of the legal-action mask in a dict observation (PettingZoo's name)."""


def action_mask_of(observation: Any, key: str | None = ACTION_MASK) -> Any:
    """The ``key`` leaf of a dict observation, or None (no key, not a dict).

    Example:
        >>> action_mask_of({"observation": obs, "action_mask": mask}) is mask
        True
    """
    if key is None or not isinstance(observation, Mapping):
        return None
    return observation.get(key)


def masked_dist_params(distribution: Any, dist_params: Any, action_mask: Any) -> Any:
    """``distribution.masked(dist_params, action_mask)``, or the params if no mask.

    Raises:
        ConfigError: there is a mask but the distribution cannot mask
            (only discrete distributions such as ``Categorical`` can).
    """
    if action_mask is None:
        return dist_params
    masked = getattr(distribution, "masked", None)
    if masked is None:
        raise ConfigError(
            f"the observation has an action mask but {type(distribution).__name__} "
            "cannot mask actions (use a Categorical, or action_mask_key=None)"
        )
    return masked(dist_params, action_mask)


class Categorical:
    """Categorical distribution parameterized by logits.

    Actions are integer tensors ``[...]`` for logits ``[..., num_actions]``.
    :meth:`masked` makes illegal actions impossible in every method, with finite
    gradients; a row with no legal action is left unmasked (docs/torch.md,
    "Distributions").

    Example:
        >>> dist = Categorical(num_actions=3)
        >>> params = DistParams(logits=torch.zeros(8, 3))   # [B, num_actions]
        >>> dist.sample(params).shape, dist.entropy(params)[0]
        (torch.Size([8]), tensor(1.0986))
    """

    def __init__(self, num_actions: int) -> None:
        check_at_least("num_actions", num_actions)
        self.num_actions = int(num_actions)

    def masked(self, dist_params: DistParams, action_mask: Any) -> DistParams:
        """Parameters with the actions where ``action_mask`` is 0 made impossible.

        Args:
            dist_params: ``DistParams(logits [..., num_actions])``.
            action_mask: ``[..., num_actions]`` bool or integer (nonzero:
                legal), e.g. the int8 ``action_mask`` of PettingZoo's classic
                games; None returns ``dist_params`` unchanged.

        Returns:
            ``DistParams`` with masked logits (same shape and dtype).

        Raises:
            ShapeError: the mask's shape differs from the logits'.
        """
        if action_mask is None:
            return dist_params
        logits = dist_params.logits
        mask = torch.as_tensor(action_mask, device=logits.device)
        if tuple(mask.shape) != tuple(logits.shape):
            raise ShapeError(
                f"action_mask has shape {tuple(mask.shape)}; expected the logits' "
                f"shape {tuple(logits.shape)} ([..., num_actions])"
            )
        legal = mask != 0
        legal = legal | ~legal.any(dim=-1, keepdim=True)  # no legal action: unmasked
        lowest = torch.finfo(logits.dtype).min
        masked_logits = logits.masked_fill(~legal, lowest)
        return dist_params._replace(logits=masked_logits)

    def _log_probs(self, dist_params: DistParams) -> torch.Tensor:
        logits = dist_params.logits
        if logits.shape[-1] != self.num_actions:
            raise ShapeError(
                f"expected logits [..., {self.num_actions}]; got {tuple(logits.shape)}"
            )
        return F.log_softmax(logits, dim=-1)

    def sample(
        self, dist_params: DistParams, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Sample actions ``[...]`` (int64) from ``logits [..., num_actions]``.

        Gumbel-max: ``argmax(logits + Gumbel noise)`` is an exact sample and
        about twice as fast as ``torch.multinomial`` for sampler-sized batches.
        The noise comes from ``generator`` (on the logits' device), or from
        torch's global RNG if None.
        """
        with torch.no_grad():
            logits = dist_params.logits
            uniform = torch.rand(
                logits.shape,
                generator=generator,
                dtype=logits.dtype,
                device=logits.device,
            ).clamp_(min=torch.finfo(logits.dtype).tiny)
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
