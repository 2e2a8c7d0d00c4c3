"""Torch models: MLP, recurrent core, encoders, heads, actor-critic."""

from parllel.torch.models.build import build_actor_critic
from parllel.torch.models.mlp import MLP

__all__ = [
    "MLP",
    "build_actor_critic",
]
