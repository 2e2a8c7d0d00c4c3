"""SAC's set-up in JAX: the entropy coefficient and the optimizers (one optax
transformation each for the actor, the critic and alpha)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from parllel.jax.algos.optimizers import adam
from parllel.validation import check_positive

__all__ = ["EntropyCoefficient", "SacOptimizers", "build_sac_optimizers"]


class EntropyCoefficient(NamedTuple):
    """SAC's entropy coefficient alpha: where it starts and whether it is learned.

    :class:`~parllel.jax.algos.SAC` keeps ``log_alpha`` in its state and tunes
    it towards the target entropy when ``learn`` is true.

    Example:
        >>> sac = SAC(agent, build_sac_optimizers(3e-4), EntropyCoefficient(1.0), seed=0)

    Attributes:
        initial: alpha at the start (positive).
        learn: tune alpha.
    """

    initial: float = 1.0
    learn: bool = True

    @property
    def initial_log_alpha(self) -> float:
        """``log(initial)``; raises ConfigError unless positive and finite."""
        check_positive("initial alpha", self.initial)
        return math.log(self.initial)


class SacOptimizers(NamedTuple):
    """One optax transformation per part SAC trains (their states are separate,
    as the parameter groups of the torch SAC's one Adam).

    Attributes:
        actor: steps the actor's parameters.
        critic: steps the twin critic's parameters.
        alpha: steps ``log_alpha`` (unused when alpha is fixed).
    """

    actor: Any
    critic: Any
    alpha: Any


def build_sac_optimizers(
    learning_rate: float = 3e-4,
    *,
    actor_learning_rate: float | None = None,
    critic_learning_rate: float | None = None,
    alpha_learning_rate: float | None = None,
) -> SacOptimizers:
    """Adam (:func:`~parllel.jax.algos.adam`, torch's defaults) for actor,
    critic and alpha.

    Example:
        >>> build_sac_optimizers(1e-3)  # CleanRL's: actor 3e-4, critic and alpha 1e-3
        >>> build_sac_optimizers(1e-3, actor_learning_rate=3e-4)

    Args:
        learning_rate: of every part not given its own.
        actor_learning_rate: the actor's.
        critic_learning_rate: the critic's.
        alpha_learning_rate: alpha's.

    Raises:
        ConfigError: a learning rate is not positive and finite.
    """
    rates = []
    for name, rate in (
        ("actor_learning_rate", actor_learning_rate),
        ("critic_learning_rate", critic_learning_rate),
        ("alpha_learning_rate", alpha_learning_rate),
    ):
        rate = learning_rate if rate is None else rate
        check_positive(name, rate)
        rates.append(float(rate))
    return SacOptimizers(*(adam(rate) for rate in rates))
