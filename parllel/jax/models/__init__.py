"""flax.linen models with the torch builders' semantics, and their parameters.

- :class:`MLP`, :class:`CnnEncoder`, :class:`ActorCriticNetwork` and
  :func:`build_actor_critic`; the other encoders, the heads and
  :data:`~parllel.jax.models.encoders.NATURE_CNN` live in their modules
  (``encoders``, ``heads``).
- :func:`init_params`, :func:`params_from_torch`, :func:`params_to_torch`:
  parameter pytrees, converted by name to and from torch state dicts.
"""

from parllel.jax.models.actor_critic import ActorCriticNetwork, build_actor_critic
from parllel.jax.models.encoders import CnnEncoder
from parllel.jax.models.mlp import MLP
from parllel.jax.models.params import init_params, params_from_torch, params_to_torch

__all__ = [
    "MLP",
    "ActorCriticNetwork",
    "CnnEncoder",
    "build_actor_critic",
    "init_params",
    "params_from_torch",
    "params_to_torch",
]
