"""Action distributions: stateless objects evaluating model-produced parameters."""

from parllel.torch.distributions.categorical import Categorical
from parllel.torch.distributions.gaussian import Gaussian, SquashedGaussian

__all__ = [
    "Categorical",
    "Gaussian",
    "SquashedGaussian",
]
