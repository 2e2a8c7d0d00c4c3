"""Torch models: MLP, recurrent core, encoders, heads, actor-critic."""

from parllel.torch.models.actor_critic import ActorCriticModel
from parllel.torch.models.build import build_actor_critic
from parllel.torch.models.cnn import NATURE_CNN, CnnEncoder
from parllel.torch.models.encoders import (
    DictEncoder,
    FlattenEncoder,
    OneHotEncoder,
    build_encoder,
)
from parllel.torch.models.mlp import MLP
from parllel.torch.models.recurrent import RecurrentCore

__all__ = [
    "MLP",
    "NATURE_CNN",
    "ActorCriticModel",
    "CnnEncoder",
    "DictEncoder",
    "FlattenEncoder",
    "OneHotEncoder",
    "RecurrentCore",
    "build_actor_critic",
    "build_encoder",
]
