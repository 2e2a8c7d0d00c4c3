"""Batch transforms: numba kernels plus small Transform objects.

Transforms turn a finished ``[T, B]`` sample tree into what the algorithm
needs, in place: advantage estimation (GAE, discounted returns, per-agent GAE for
multi-agent trees) with
``terminated`` and ``truncated`` kept apart, advantage/observation/reward
normalization, reward clipping, the wait-reset ``valid`` mask and the V-trace
off-policy correction for samples from a lagged policy, and statistics per
run for K seeds in one tree (:mod:`~parllel.transforms.per_run`). Each
Transform is built from an example sample tree (it checks what it reads and
allocates what it writes) and :class:`Compose` chains them into the pipeline a
sampler runs after every batch. Imports numpy and numba only, never torch.
"""

from parllel.transforms.advantage import EstimateAdvantage, NormalizeAdvantage
from parllel.transforms.base import Compose, Transform
from parllel.transforms.multiagent_advantage import MultiAgentGAE
from parllel.transforms.observation import NormalizeObservations
from parllel.transforms.off_policy import ComputeVTrace
from parllel.transforms.per_run import PerRunObservations, PerRunTransform
from parllel.transforms.reward import ClipRewards, NormalizeRewards
from parllel.transforms.valid import ComputeValidMask

__all__ = [
    "ClipRewards",
    "Compose",
    "ComputeVTrace",
    "ComputeValidMask",
    "EstimateAdvantage",
    "MultiAgentGAE",
    "NormalizeAdvantage",
    "NormalizeObservations",
    "NormalizeRewards",
    "PerRunObservations",
    "PerRunTransform",
    "Transform",
]
