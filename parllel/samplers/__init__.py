"""Samplers: the loop that asks the agent for actions, steps the cages and fills batches.

- :func:`build_sample_tree`: allocate every field of a batch from examples.
- :class:`FeedForwardSampler`: agents without recurrent state.
- :class:`RecurrentSampler`: recurrent agents; optional wait-reset with ``valid``.
- :class:`AlternatingSampler`: two halves of the envs; inference for one
  overlaps stepping of the other.
- :class:`EvalSampler`: deterministic evaluation episodes.
- :class:`FiniteCheck`: the training samplers' NaN/inf check of each batch.

No torch is imported here.
"""

from parllel.samplers.alternating import AlternatingSampler
from parllel.samplers.build import build_sample_tree
from parllel.samplers.evaluation import EvalSampler
from parllel.samplers.feedforward import FeedForwardSampler
from parllel.samplers.finite import FiniteCheck
from parllel.samplers.recurrent import RecurrentSampler
from parllel.samplers.steps import GroupViews

__all__ = [
    "AlternatingSampler",
    "EvalSampler",
    "FeedForwardSampler",
    "FiniteCheck",
    "GroupViews",
    "RecurrentSampler",
    "build_sample_tree",
]
