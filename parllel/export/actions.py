"""Actions from an exported network's outputs, in plain numpy.

The numpy twins of the JAX distributions' ``deterministic`` and ``sample``
(:mod:`parllel.jax.distributions`) and of the DQN agent's epsilon-greedy
choice, for a policy that plays without JAX. An export describes its
distribution as ``{"type": ..., **settings}``
(:func:`parllel.jax.export.describe_distribution`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from parllel.errors import PolicyFileError

__all__ = ["choose_actions"]


def _masked(logits: np.ndarray, mask: Any) -> np.ndarray:
    """Logits with illegal actions made impossible (a row without a legal
    action is left unmasked), as the JAX ``Categorical.masked``."""
    if mask is None:
        return logits
    legal = np.asarray(mask) != 0
    legal = legal | ~legal.any(axis=-1, keepdims=True)
    return np.where(legal, logits, np.finfo(logits.dtype).min)


def _log_std(distribution: Mapping[str, Any], log_std: np.ndarray) -> np.ndarray:
    low, high = distribution.get("min_log_std"), distribution.get("max_log_std")
    if low is None and high is None:
        return log_std
    return np.clip(log_std, low, high)


def choose_actions(
    distribution: Mapping[str, Any],
    outputs: Mapping[str, np.ndarray],
    *,
    deterministic: bool,
    rng: np.random.Generator,
    action_mask: Any = None,
) -> np.ndarray:
    """Actions ``[N, ...]`` from the network's ``outputs`` for a batch.

    Args:
        distribution: the export's distribution description.
        outputs: ``{"logits"}``, ``{"mean", "log_std"}`` or ``{"q_values"}``.
        deterministic: the mode (greedy for Q values); else a sample
            (epsilon-greedy for Q values).
        rng: the generator of stochastic actions.
        action_mask: legal actions ``[N, num_actions]`` of a categorical
            policy (None: all).

    Raises:
        PolicyFileError: a distribution type this version does not know.
    """
    kind = distribution.get("type")
    if kind == "Categorical":
        logits = _masked(outputs["logits"], action_mask)
        if deterministic:
            return np.argmax(logits, axis=-1)
        gumbel = rng.gumbel(size=logits.shape)
        return np.argmax(logits + gumbel, axis=-1)
    if kind in ("Gaussian", "SquashedGaussian"):
        mean = outputs["mean"]
        action = mean
        if not deterministic:
            std = np.exp(_log_std(distribution, outputs["log_std"]))
            action = mean + std * rng.standard_normal(mean.shape).astype(mean.dtype)
        if kind == "Gaussian":
            return action
        low = np.asarray(distribution["low"], mean.dtype)
        high = np.asarray(distribution["high"], mean.dtype)
        center, scale = (high + low) / 2, (high - low) / 2
        return center + scale * np.tanh(action)
    if kind == "EpsilonGreedy":
        greedy = np.argmax(outputs["q_values"], axis=-1)
        if deterministic:
            return greedy
        n = outputs["q_values"].shape[-1]
        explore = rng.random(greedy.shape) < float(distribution["epsilon"])
        return np.where(explore, rng.integers(0, n, greedy.shape), greedy)
    raise PolicyFileError(
        f"the policy's distribution {kind!r} is not one parllel plays in numpy "
        "(Categorical, Gaussian, SquashedGaussian, EpsilonGreedy)"
    )
