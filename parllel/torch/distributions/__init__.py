"""Action distributions: stateless objects evaluating model-produced parameters."""

from parllel.torch.distributions.base import DistParams, Distribution, GaussianParams
from parllel.torch.distributions.categorical import (
    ACTION_MASK,
    Categorical,
    action_mask_of,
    masked_dist_params,
)
from parllel.torch.distributions.gaussian import Gaussian, SquashedGaussian

__all__ = [
    "ACTION_MASK",
    "Categorical",
    "DistParams",
    "Distribution",
    "Gaussian",
    "GaussianParams",
    "SquashedGaussian",
    "action_mask_of",
    "masked_dist_params",
]
