"""Torch models: MLP, recurrent core, encoders, heads, actor-critic."""

from parllel.torch.models.actor_critic import ActorCriticModel, ActorCriticOutput
from parllel.torch.models.build import build_actor_critic
from parllel.torch.models.cnn import NATURE_CNN, CnnEncoder
from parllel.torch.models.dtypes import FollowsModelDtype, to_model_dtype
from parllel.torch.models.encoders import (
    DictEncoder,
    FlattenEncoder,
    OneHotEncoder,
    build_encoder,
    is_image_shape,
)
from parllel.torch.models.heads import CategoricalHead, GaussianHead, ValueHead
from parllel.torch.models.leading_dims import (
    LeadingDims,
    flatten_leading_dims,
    infer_leading_dims,
    restore_leading_dims,
)
from parllel.torch.models.mlp import MLP
from parllel.torch.models.recurrent import RecurrentCore, RecurrentState

__all__ = [
    "MLP",
    "NATURE_CNN",
    "ActorCriticModel",
    "ActorCriticOutput",
    "CategoricalHead",
    "CnnEncoder",
    "DictEncoder",
    "FlattenEncoder",
    "FollowsModelDtype",
    "GaussianHead",
    "LeadingDims",
    "OneHotEncoder",
    "RecurrentCore",
    "RecurrentState",
    "ValueHead",
    "build_actor_critic",
    "build_encoder",
    "flatten_leading_dims",
    "infer_leading_dims",
    "is_image_shape",
    "restore_leading_dims",
    "to_model_dtype",
]
