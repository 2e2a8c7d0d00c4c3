"""Action distributions over JAX arrays: Categorical, Gaussian, SquashedGaussian.

The JAX twins of :mod:`parllel.torch.distributions`, with the same methods
and the same math; stateless apart from their configuration, pure functions
of the parameters a model produced (so they trace under ``jax.jit`` and
``jax.vmap``). Sampling takes an explicit PRNG key.

Example:
    >>> dist = Categorical(num_actions=3)
    >>> params = DistParams(logits=jnp.zeros((8, 3)))
    >>> action = dist.sample(params, jax.random.key(0))  # [8] int32
    >>> dist.log_likelihood(action, params).shape
    (8,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from parllel.errors import ConfigError, ShapeError
from parllel.validation import check_at_least

__all__ = [
    "Categorical",
    "DistParams",
    "Gaussian",
    "GaussianParams",
    "SquashedGaussian",
]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


class DistParams(NamedTuple):
    """Parameters of a :class:`Categorical`: ``logits [..., num_actions]``."""

    logits: Any


class GaussianParams(NamedTuple):
    """Parameters of a diagonal Gaussian (also before squashing):
    ``mean [..., action_dim]`` and ``log_std`` (broadcastable to it)."""

    mean: Any
    log_std: Any


class Categorical:
    """Categorical distribution over ``num_actions`` actions, from logits.

    Actions are ``int32`` arrays ``[...]`` (the sample tree stores them as
    ``int64``, as with torch). :meth:`masked` makes illegal actions
    impossible, as the torch ``Categorical`` does.

    Args:
        num_actions: number of discrete actions.
    """

    def __init__(self, num_actions: int) -> None:
        check_at_least("num_actions", num_actions)
        self.num_actions = int(num_actions)

    def masked(self, dist_params: DistParams, action_mask: Any) -> DistParams:
        """Logits with the actions where ``action_mask`` is 0 made impossible
        (a row without a legal action is left unmasked)."""
        if action_mask is None:
            return dist_params
        logits = dist_params.logits
        legal = jnp.asarray(action_mask) != 0
        legal = legal | ~legal.any(axis=-1, keepdims=True)
        lowest = jnp.finfo(logits.dtype).min
        return DistParams(jnp.where(legal, logits, lowest))

    def _log_probs(self, dist_params: DistParams) -> Any:
        logits = dist_params.logits
        if logits.shape[-1] != self.num_actions:
            raise ShapeError(
                f"expected logits [..., {self.num_actions}]; got {tuple(logits.shape)}"
            )
        return jax.nn.log_softmax(logits, axis=-1)

    def sample(self, dist_params: DistParams, key: jax.Array) -> Any:
        """Sample actions ``[...]`` (Gumbel-max) with ``key``."""
        return jax.random.categorical(key, dist_params.logits, axis=-1)

    def deterministic(self, dist_params: DistParams) -> Any:
        """The most likely action ``[...]``."""
        return jnp.argmax(dist_params.logits, axis=-1)

    def log_likelihood(self, x: Any, dist_params: DistParams) -> Any:
        """``log p(x)`` for integer actions ``x [...]``."""
        log_probs = self._log_probs(dist_params)
        index = jnp.asarray(x).astype(jnp.int32)[..., None]
        return jnp.take_along_axis(log_probs, index, axis=-1)[..., 0]

    def entropy(self, dist_params: DistParams) -> Any:
        """``-sum p log p``, ``[...]``."""
        log_probs = self._log_probs(dist_params)
        return -(jnp.exp(log_probs) * log_probs).sum(axis=-1)

    def kl(self, old_params: DistParams, new_params: DistParams) -> Any:
        """``KL(old || new)``, ``[...]``."""
        old = self._log_probs(old_params)
        new = self._log_probs(new_params)
        return (jnp.exp(old) * (old - new)).sum(axis=-1)


class Gaussian:
    """Diagonal Gaussian; log-probabilities and entropies summed over action dims.

    ``log_std`` is clipped into ``[min_log_std, max_log_std]`` (where given)
    in every method.

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

    def mean_and_log_std(self, dist_params: GaussianParams) -> tuple[Any, Any]:
        """The mean and the clipped log-std, broadcast to the mean's shape."""
        mean, log_std = dist_params.mean, dist_params.log_std
        if mean.shape[-1] != self.action_dim:
            raise ShapeError(
                f"expected mean [..., {self.action_dim}]; got {tuple(mean.shape)}"
            )
        if self.min_log_std is not None or self.max_log_std is not None:
            log_std = jnp.clip(log_std, self.min_log_std, self.max_log_std)
        return mean, jnp.broadcast_to(log_std, mean.shape)

    def rsample(self, dist_params: GaussianParams, key: jax.Array) -> Any:
        """Reparameterized sample ``mean + std * noise`` (gradients flow)."""
        mean, log_std = self.mean_and_log_std(dist_params)
        noise = jax.random.normal(key, mean.shape, mean.dtype)
        return mean + jnp.exp(log_std) * noise

    def sample(self, dist_params: GaussianParams, key: jax.Array) -> Any:
        """Sample actions ``[..., action_dim]`` (no gradient)."""
        return jax.lax.stop_gradient(self.rsample(dist_params, key))

    def deterministic(self, dist_params: GaussianParams) -> Any:
        """The mean."""
        return dist_params.mean

    def log_likelihood(self, x: Any, dist_params: GaussianParams) -> Any:
        """``log N(x; mean, std)`` summed over action dims, ``[...]``."""
        mean, log_std = self.mean_and_log_std(dist_params)
        z = (x - mean) * jnp.exp(-log_std)
        return (-0.5 * z**2 - log_std - 0.5 * _LOG_2PI).sum(axis=-1)

    def entropy(self, dist_params: GaussianParams) -> Any:
        """``sum(log_std + 0.5 * log(2 pi e))``, ``[...]``."""
        _, log_std = self.mean_and_log_std(dist_params)
        return (log_std + 0.5 * (_LOG_2PI + 1.0)).sum(axis=-1)

    def kl(self, old_params: GaussianParams, new_params: GaussianParams) -> Any:
        """``KL(old || new)`` summed over dims, ``[...]``."""
        old_mean, old_log_std = self.mean_and_log_std(old_params)
        new_mean, new_log_std = self.mean_and_log_std(new_params)
        ratio_var = jnp.exp(2.0 * (old_log_std - new_log_std))
        mean_term = ((old_mean - new_mean) * jnp.exp(-new_log_std)) ** 2
        kl = new_log_std - old_log_std + 0.5 * (ratio_var + mean_term - 1.0)
        return kl.sum(axis=-1)


class SquashedGaussian:
    """Gaussian squashed by ``tanh`` and scaled to Box bounds ``[low, high]``.

    ``action = center + scale * tanh(u)``, ``u ~ N(mean, std)``; the
    log-density uses ``log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))``
    plus ``log(scale)``, as the torch ``SquashedGaussian``. Use
    :meth:`sample_with_log_prob` (SAC): both from the same ``u``.
    :meth:`entropy` is the pre-squash Gaussian's (a proxy); :meth:`kl` is exact.

    Args:
        action_dim: size of the action vector.
        low: lower bounds (scalar or ``[action_dim]``), default -1.
        high: upper bounds (scalar or ``[action_dim]``), default 1.
        min_log_std: optional lower clip of ``log_std``.
        max_log_std: optional upper clip of ``log_std``.
        epsilon: clipping margin when inverting actions at the bounds.
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
        low_a = np.broadcast_to(np.asarray(low, np.float32), (action_dim,))
        high_a = np.broadcast_to(np.asarray(high, np.float32), (action_dim,))
        if not (np.isfinite(low_a).all() and np.isfinite(high_a).all()):
            raise ConfigError("SquashedGaussian needs finite action bounds")
        if not (high_a > low_a).all():
            raise ConfigError(f"high must exceed low; got low={low}, high={high}")
        self.center = (high_a + low_a) / 2.0  # [action_dim], numpy: a jit constant
        self.scale = (high_a - low_a) / 2.0
        self.epsilon = float(epsilon)

    def squash(self, u: Any) -> Any:
        """Map pre-squash values ``u`` to actions within the bounds."""
        return self.center + self.scale * jnp.tanh(u)

    def _log_prob_pre_squash(self, u: Any, dist_params: GaussianParams) -> Any:
        log_prob = self.gaussian.log_likelihood(u, dist_params)
        log_det = 2.0 * (_LOG_2 - u - jax.nn.softplus(-2.0 * u)) + np.log(self.scale)
        return log_prob - log_det.sum(axis=-1)

    def sample_with_log_prob(
        self, dist_params: GaussianParams, key: jax.Array
    ) -> tuple[Any, Any]:
        """Reparameterized action ``[..., action_dim]`` and its log-prob ``[...]``."""
        u = self.gaussian.rsample(dist_params, key)
        return self.squash(u), self._log_prob_pre_squash(u, dist_params)

    def sample(self, dist_params: GaussianParams, key: jax.Array) -> Any:
        """Sample actions within the bounds (no gradient)."""
        return jax.lax.stop_gradient(
            self.squash(self.gaussian.rsample(dist_params, key))
        )

    def deterministic(self, dist_params: GaussianParams) -> Any:
        """``center + scale * tanh(mean)``."""
        return self.squash(dist_params.mean)

    def log_likelihood(self, x: Any, dist_params: GaussianParams) -> Any:
        """Log-density of actions ``x [..., action_dim]`` within the bounds."""
        y = jnp.clip(
            (x - self.center) / self.scale, -1.0 + self.epsilon, 1.0 - self.epsilon
        )
        return self._log_prob_pre_squash(jnp.arctanh(y), dist_params)

    def entropy(self, dist_params: GaussianParams) -> Any:
        """Entropy of the pre-squash Gaussian (a proxy)."""
        return self.gaussian.entropy(dist_params)

    def kl(self, old_params: GaussianParams, new_params: GaussianParams) -> Any:
        """Exact ``KL(old || new)`` (the pre-squash Gaussians')."""
        return self.gaussian.kl(old_params, new_params)
