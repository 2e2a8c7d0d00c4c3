"""Output heads (flax.linen): distribution parameters and values from features."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import linen as nn

from parllel.jax.distributions import DistParams, GaussianParams
from parllel.jax.models.layers import dense

__all__ = ["CategoricalHead", "GaussianHead", "ValueHead"]


class CategoricalHead(nn.Module):
    """Linear layer to ``DistParams(logits [..., num_actions])``.

    Attributes:
        num_actions: number of discrete actions.
        init_scale: orthogonal gain (small: near-uniform start).
        param_dtype: the model's floating dtype.
    """

    num_actions: int
    init_scale: float = 0.01
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, features: Any) -> DistParams:
        """``[..., F]`` to logits ``[..., num_actions]``."""
        layer = dense(
            self.num_actions,
            features.shape[-1],
            self.init_scale,
            "linear",
            self.param_dtype,
        )
        return DistParams(logits=layer(features))


class GaussianHead(nn.Module):
    """Linear layer to ``GaussianParams(mean, log_std)``.

    With ``state_dependent_std=False`` (PPO's default) ``log_std`` is one
    learned parameter ``[action_dim]`` broadcast to the mean's shape, as in
    the torch ``GaussianHead``; with True a second layer computes it.

    Attributes:
        action_dim: size of the action vector.
        state_dependent_std: whether ``log_std`` is computed from features.
        init_log_std: initial ``log_std`` (or the bias of its layer).
        init_scale: orthogonal gain of the mean layer.
        param_dtype: the model's floating dtype.
    """

    action_dim: int
    state_dependent_std: bool = False
    init_log_std: float = 0.0
    init_scale: float = 0.01
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, features: Any) -> GaussianParams:
        """``[..., F]`` to mean and log_std ``[..., action_dim]``."""
        fan_in = features.shape[-1]
        mean = dense(
            self.action_dim, fan_in, self.init_scale, "mean", self.param_dtype
        )(features)
        if self.state_dependent_std:
            layer = nn.Dense(
                self.action_dim,
                kernel_init=nn.initializers.orthogonal(scale=self.init_scale),
                bias_init=nn.initializers.constant(self.init_log_std),
                param_dtype=self.param_dtype,
                dtype=self.param_dtype,
                name="log_std_layer",
            )
            log_std = layer(features)
        else:
            log_std = self.param(
                "log_std",
                nn.initializers.constant(self.init_log_std),
                (self.action_dim,),
                self.param_dtype,
            )
            log_std = jnp.broadcast_to(log_std, mean.shape)
        return GaussianParams(mean=mean, log_std=log_std)


class ValueHead(nn.Module):
    """Linear layer to one value per state, ``[...]``.

    Attributes:
        init_scale: orthogonal gain.
        param_dtype: the model's floating dtype.
    """

    init_scale: float = 1.0
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, features: Any) -> Any:
        """``[..., F]`` to ``[...]``."""
        layer = dense(
            1, features.shape[-1], self.init_scale, "linear", self.param_dtype
        )
        return layer(features)[..., 0]
