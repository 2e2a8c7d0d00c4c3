"""Diagonal Gaussian and tanh-squashed Gaussian over continuous actions."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from parllel.errors import ConfigError, ShapeError
from parllel.torch.distributions.base import GaussianParams
from parllel.validation import check_at_least

__all__ = ["Gaussian", "SquashedGaussian"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


class Gaussian:
    """Diagonal Gaussian; log-probabilities and entropies summed over action dims.

    Whether the log-std depends on the state is the model's choice (see
    :class:`~parllel.torch.models.GaussianHead`); this class only reads
    ``GaussianParams(mean, log_std)``, optionally clamping ``log_std`` into
    ``[min_log_std, max_log_std]`` in every method, so sampling, the loss
    and the KL all see the same clipped distribution.

    Example:
        >>> dist = Gaussian(action_dim=2, min_log_std=-5.0, max_log_std=2.0)
        >>> params = GaussianParams(torch.zeros(8, 2), torch.zeros(2))
        >>> dist.log_likelihood(dist.sample(params), params).shape
        torch.Size([8])

    Args:
        action_dim: size of the action vector.
        min_log_std: optional lower clip of ``log_std``.
        max_log_std: optional upper clip of ``log_std``.
    """

    def __init__(
        self,
        action_dim: int,
        min_log_std: float | None = None,
        max_log_std: float | None = None,
    ) -> None:
        check_at_least("action_dim", action_dim)
        if (
            min_log_std is not None
            and max_log_std is not None
            and min_log_std > max_log_std
        ):
            raise ConfigError(
                f"min_log_std ({min_log_std}) must not exceed max_log_std "
                f"({max_log_std})"
            )
        self.action_dim = int(action_dim)
        self.min_log_std = min_log_std
        self.max_log_std = max_log_std

    def mean_and_log_std(
        self, dist_params: GaussianParams
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean and the clipped log-std, broadcast to the mean's shape."""
        mean, log_std = dist_params.mean, dist_params.log_std
        if mean.shape[-1] != self.action_dim:
            raise ShapeError(
                f"expected mean [..., {self.action_dim}]; got {tuple(mean.shape)}"
            )
        if self.min_log_std is not None or self.max_log_std is not None:
            log_std = log_std.clamp(self.min_log_std, self.max_log_std)
        return mean, log_std.expand_as(mean)

    def sample(
        self, dist_params: GaussianParams, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Sample actions ``[..., action_dim]`` (no gradient).

        The noise comes from ``generator`` (on the mean's device), or from
        torch's global RNG if None.
        """
        with torch.no_grad():
            return self.rsample(dist_params, generator)

    def rsample(
        self, dist_params: GaussianParams, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Reparameterized sample ``mean + std * noise`` (gradients flow)."""
        mean, log_std = self.mean_and_log_std(dist_params)
        noise = torch.randn(
            mean.shape, generator=generator, dtype=mean.dtype, device=mean.device
        )
        return mean + log_std.exp() * noise

    def deterministic(self, dist_params: GaussianParams) -> torch.Tensor:
        """The mean."""
        return dist_params.mean

    def log_likelihood(
        self, x: torch.Tensor, dist_params: GaussianParams
    ) -> torch.Tensor:
        """``log N(x; mean, std)`` summed over action dims, ``[...]``."""
        mean, log_std = self.mean_and_log_std(dist_params)
        z = (x - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * _LOG_2PI).sum(dim=-1)

    def entropy(self, dist_params: GaussianParams) -> torch.Tensor:
        """``sum(log_std + 0.5 * log(2 pi e))``, ``[...]``."""
        _, log_std = self.mean_and_log_std(dist_params)
        return (log_std + 0.5 * (_LOG_2PI + 1.0)).sum(dim=-1)

    def kl(
        self, old_params: GaussianParams, new_params: GaussianParams
    ) -> torch.Tensor:
        """``KL(old || new)`` of diagonal Gaussians, summed over dims, ``[...]``."""
        old_mean, old_log_std = self.mean_and_log_std(old_params)
        new_mean, new_log_std = self.mean_and_log_std(new_params)
        ratio_var = torch.exp(2.0 * (old_log_std - new_log_std))
        mean_term = ((old_mean - new_mean) * torch.exp(-new_log_std)).pow(2)
        kl = new_log_std - old_log_std + 0.5 * (ratio_var + mean_term - 1.0)
        return kl.sum(dim=-1)


class SquashedGaussian:
    """Gaussian squashed by ``tanh`` and scaled to Box bounds ``[low, high]``.

    ``action = center + scale * tanh(u)`` with ``u ~ N(mean, std)``. Prefer
    :meth:`sample_with_log_prob` where both are needed (e.g. SAC);
    :meth:`log_likelihood` of a given action inverts the squashing with
    ``atanh``. :meth:`kl` is exact; :meth:`entropy` is the pre-squash
    Gaussian's, a proxy (see docs/torch.md, "Distributions").

    Args:
        low: lower bounds (scalar or ``[action_dim]``), default -1; ``high``
            likewise, default 1.
        min_log_std: optional lower clip of ``log_std``; ``max_log_std``
            likewise.
        epsilon: clipping margin used when inverting actions at the bounds.
    """

    def __init__(
        self,
        action_dim: int,
        low: float | Sequence[float] | np.ndarray = -1.0,
        high: float | Sequence[float] | np.ndarray = 1.0,
        min_log_std: float | None = None,
        max_log_std: float | None = None,
        epsilon: float = 1e-6,
    ) -> None:
        self.gaussian = Gaussian(action_dim, min_log_std, max_log_std)
        self.action_dim = self.gaussian.action_dim
        low_t = torch.tensor(np.broadcast_to(low, (action_dim,)), dtype=torch.float32)
        high_t = torch.tensor(np.broadcast_to(high, (action_dim,)), dtype=torch.float32)
        if not torch.isfinite(low_t).all() or not torch.isfinite(high_t).all():
            raise ConfigError("SquashedGaussian needs finite action bounds")
        if not (high_t > low_t).all():
            raise ConfigError(f"high must exceed low; got low={low}, high={high}")
        self.center = (high_t + low_t) / 2.0  # [action_dim]
        self.scale = (high_t - low_t) / 2.0  # [action_dim]
        self.epsilon = float(epsilon)

    def _bounds(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            self.center.to(like.device, like.dtype),
            self.scale.to(like.device, like.dtype),
        )

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        """Map pre-squash values ``u`` to actions within the bounds."""
        center, scale = self._bounds(u)
        return center + scale * torch.tanh(u)

    def _log_prob_pre_squash(
        self, u: torch.Tensor, dist_params: GaussianParams
    ) -> torch.Tensor:
        log_prob = self.gaussian.log_likelihood(u, dist_params)
        _, scale = self._bounds(u)
        log_det = 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u)) + torch.log(scale)
        return log_prob - log_det.sum(dim=-1)

    def sample_with_log_prob(
        self, dist_params: GaussianParams, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized action ``[..., action_dim]`` and its log-prob ``[...]``."""
        u = self.gaussian.rsample(dist_params, generator)
        return self.squash(u), self._log_prob_pre_squash(u, dist_params)

    def sample(
        self, dist_params: GaussianParams, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Sample actions within the bounds (no gradient); noise from
        ``generator``, or torch's global RNG if None."""
        with torch.no_grad():
            return self.squash(self.gaussian.rsample(dist_params, generator))

    def deterministic(self, dist_params: GaussianParams) -> torch.Tensor:
        """``center + scale * tanh(mean)``."""
        return self.squash(dist_params.mean)

    def log_likelihood(
        self, x: torch.Tensor, dist_params: GaussianParams
    ) -> torch.Tensor:
        """Log-density of actions ``x [..., action_dim]`` within the bounds, ``[...]``."""
        center, scale = self._bounds(x)
        y = ((x - center) / scale).clamp(-1.0 + self.epsilon, 1.0 - self.epsilon)
        return self._log_prob_pre_squash(torch.atanh(y), dist_params)

    def entropy(self, dist_params: GaussianParams) -> torch.Tensor:
        """Entropy of the pre-squash Gaussian (a proxy; see the class docstring)."""
        return self.gaussian.entropy(dist_params)

    def kl(
        self, old_params: GaussianParams, new_params: GaussianParams
    ) -> torch.Tensor:
        """Exact ``KL(old || new)`` (equal to the pre-squash Gaussians' KL)."""
        return self.gaussian.kl(old_params, new_params)
