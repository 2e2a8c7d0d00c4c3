"""Multi-layer perceptron (flax.linen), the JAX twin of parllel.torch's MLP."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
from flax import linen as nn

from parllel.jax.models.layers import dense

__all__ = ["MLP"]


class MLP(nn.Module):
    """Dense layers with an activation between them, over the last dim.

    ``[..., F]`` to ``[..., output_size]`` (any leading dims). Without
    ``output_size`` the last hidden layer (activated) is the output (a
    trunk); with it a final linear layer follows (a head). Parameter names
    follow the torch ``MLP``'s ``nn.Sequential`` (``layers_0``, ``layers_2``,
    ...), so :func:`~parllel.jax.models.params.params_from_torch` maps them.

    Example:
        >>> mlp = MLP(hidden_sizes=(64, 64), output_size=2)
        >>> params = mlp.init(jax.random.key(0), jnp.zeros((8, 4)))["params"]
        >>> mlp.apply({"params": params}, jnp.zeros((8, 4))).shape
        (8, 2)

    Attributes:
        hidden_sizes: sizes of the hidden layers (may be empty).
        output_size: size of an optional final linear layer.
        activation: function applied after each hidden layer.
        hidden_init_scale: orthogonal gain of the hidden layers (zero biases);
            None: torch's default initialization.
        output_init_scale: orthogonal gain of the output layer; None: torch's
            default.
        param_dtype: dtype of the parameters and the computation.
    """

    hidden_sizes: Sequence[int] = ()
    output_size: int | None = None
    activation: Callable[[Any], Any] = nn.tanh
    hidden_init_scale: float | None = None
    output_init_scale: float | None = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, inputs: Any) -> Any:
        """Apply the layers: ``[..., F]`` to ``[..., output_size]``."""
        x = inputs
        index = 0
        for size in self.hidden_sizes:
            layer = dense(
                int(size),
                x.shape[-1],
                self.hidden_init_scale,
                f"layers_{index}",
                self.param_dtype,
            )
            x = self.activation(layer(x))
            index += 2  # torch's Sequential: linear, activation, linear, ...
        if self.output_size is not None:
            x = dense(
                int(self.output_size),
                x.shape[-1],
                self.output_init_scale,
                f"layers_{index}",
                self.param_dtype,
            )(x)
        return x
