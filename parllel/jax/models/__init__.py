"""flax.linen models with the torch builders' semantics, and their parameters.

- :class:`MLP`, encoders (:class:`CnnEncoder` with :data:`NATURE_CNN`,
  :class:`FlattenEncoder`, :class:`OneHotEncoder`, :class:`DictEncoder`,
  :func:`build_encoder`), heads, :class:`ActorCriticNetwork` and
  :func:`build_actor_critic`.
- :func:`init_params`, :func:`params_from_torch`, :func:`params_to_torch`:
  parameter pytrees, converted by name to and from torch state dicts.
"""

from parllel.jax.models.actor_critic import (
    ActorCriticNetwork,
    ActorCriticOutput,
    build_actor_critic,
)
from parllel.jax.models.encoders import (
    NATURE_CNN,
    CnnEncoder,
    DictEncoder,
    FlattenEncoder,
    OneHotEncoder,
    build_encoder,
)
from parllel.jax.models.heads import CategoricalHead, GaussianHead, ValueHead
from parllel.jax.models.mlp import MLP
from parllel.jax.models.params import (
    init_params,
    load_params,
    params_from_torch,
    params_to_numpy,
    params_to_torch,
)

__all__ = [
    "MLP",
    "NATURE_CNN",
    "ActorCriticNetwork",
    "ActorCriticOutput",
    "CategoricalHead",
    "CnnEncoder",
    "DictEncoder",
    "FlattenEncoder",
    "GaussianHead",
    "OneHotEncoder",
    "ValueHead",
    "build_actor_critic",
    "build_encoder",
    "init_params",
    "load_params",
    "params_from_torch",
    "params_to_numpy",
    "params_to_torch",
]
