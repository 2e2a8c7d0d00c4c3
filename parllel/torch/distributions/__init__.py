"""Action distributions: stateless objects evaluating model-produced parameters."""

from parllel.torch.distributions.base import DistParams, Distribution
from parllel.torch.distributions.categorical import Categorical
from parllel.torch.distributions.gaussian import Gaussian, SquashedGaussian

__all__ = [
    "Categorical",
    "DistParams",
    "Distribution",
    "Gaussian",
    "SquashedGaussian",
]
