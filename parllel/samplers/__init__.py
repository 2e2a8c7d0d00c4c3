"""Samplers: the loop that asks the agent for actions, steps the cages and fills batches.

- :func:`sample_tree_from_examples`: allocate every field of a batch from examples
  (:func:`parllel.builders.build_sample_tree` does it from a cage and a handler).
- :class:`FeedForwardSampler`: agents without recurrent state.
- :class:`RecurrentSampler`: recurrent agents; optional wait-reset with ``valid``.
- :class:`AlternatingSampler`: two halves of the envs; inference for one
  overlaps stepping of the other.
- :class:`EvalSampler`: deterministic evaluation episodes.
- :class:`~parllel.samplers.recorded.RecordedFields`: which optional fields a
  sample tree records, read once when a sampler is built.
- :class:`FiniteCheck`: the training samplers' NaN/inf check of each batch.
- :class:`ObservationNormalizer`: what a sampler's ``observation_normalizer`` provides.
- :class:`BackgroundSampler`: any of these samplers in its own process, filling
  a TreeRing while the learner trains, with a bounded policy lag.
- :mod:`parllel.samplers.protocols`: what a training loop needs from a
  sampler (:class:`~parllel.samplers.protocols.TrainingSampler`, the
  :class:`~parllel.samplers.protocols.AsyncSampler` base class) and from a
  weight publisher.
- :class:`TreeRing`: K preallocated shared trees handed in turn from a writer
  (a sampler) to a reader (a learner) in another process.

No torch is imported here.
"""

from parllel.samplers.alternating import AlternatingSampler
from parllel.samplers.background import BackgroundSampler
from parllel.samplers.build import sample_tree_from_examples
from parllel.samplers.evaluation import EvalSampler
from parllel.samplers.feedforward import FeedForwardSampler
from parllel.samplers.recurrent import RecurrentSampler

__all__ = [
    "AlternatingSampler",
    "BackgroundSampler",
    "EvalSampler",
    "FeedForwardSampler",
    "RecurrentSampler",
    "sample_tree_from_examples",
]
