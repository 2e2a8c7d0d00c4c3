"""flax.linen models with the torch builders' semantics, and their parameters.

:class:`MLP` and :func:`build_actor_critic` (an
:class:`~parllel.jax.models.actor_critic.ActorCriticNetwork`); the encoders,
the heads and the parameter pytrees' conversions to and from torch state dicts
(``params``) live in their modules.
"""

from parllel.jax.models.actor_critic import build_actor_critic
from parllel.jax.models.mlp import MLP

__all__ = [
    "MLP",
    "build_actor_critic",
]
