"""Optimizers and gradient clipping with torch's semantics, for the JAX algorithms."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

__all__ = ["adam", "clip_grad_norm", "set_learning_rate"]


def adam(learning_rate: float, eps: float = 1e-8) -> optax.GradientTransformation:
    """Adam with torch's defaults (betas 0.9 and 0.999, ``eps=1e-8`` added
    to the bias-corrected root), its learning rate settable per update.

    The learning rate lives in the optimizer state
    (``optax.inject_hyperparams``), so an algorithm's schedule changes it
    between compiled updates without recompiling: see
    :func:`set_learning_rate`.

    Example:
        >>> ppo = PPO(agent, adam(3e-4), learning_rate=linear_schedule(3e-4, 0.0))
    """
    return optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate, eps=eps)


def set_learning_rate(opt_state: Any, learning_rate: Any) -> Any:
    """``opt_state`` of an :func:`adam` (any ``inject_hyperparams``
    optimizer) with its learning rate replaced; traceable under jit."""
    hyperparams = dict(opt_state.hyperparams)
    old = hyperparams["learning_rate"]
    hyperparams["learning_rate"] = jnp.asarray(learning_rate, dtype=old.dtype)
    return opt_state._replace(hyperparams=hyperparams)


def has_learning_rate(opt_state: Any) -> bool:
    """Whether ``opt_state`` holds a learning rate :func:`set_learning_rate` can set."""
    hyperparams = getattr(opt_state, "hyperparams", None)
    return isinstance(hyperparams, dict) and "learning_rate" in hyperparams


def learning_rate_of(opt_state: Any) -> Any:
    """The learning rate in ``opt_state`` (see :func:`has_learning_rate`)."""
    return opt_state.hyperparams["learning_rate"]


def clip_grad_norm(grads: Any, max_norm: float | None) -> tuple[Any, Any]:
    """Scale ``grads`` to a global 2-norm of at most ``max_norm``, as torch's
    ``clip_grad_norm_`` does (factor ``min(max_norm / (norm + 1e-6), 1)``).

    Args:
        grads: the gradient pytree.
        max_norm: the largest global norm; None only measures it.

    Returns:
        ``(clipped grads, the global norm before clipping)``.
    """
    leaves = jax.tree.leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves))
    if max_norm is None:
        return grads, norm
    factor = jnp.minimum(max_norm / (norm + 1e-6), 1.0)
    return jax.tree.map(lambda g: g * factor.astype(g.dtype), grads), norm
