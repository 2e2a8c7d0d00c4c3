"""What a training loop needs from a sampler and from a weight publisher.

- :class:`TrainingSampler`: a synchronous sampler (collects each batch in
  the learner's process when asked): every :class:`BatchSampler
  <parllel.samplers.base.BatchSampler>` (FeedForward, Recurrent,
  Alternating).
- :class:`AsyncSampler`: the base class of a sampler that collects ahead in
  other processes and returns a :class:`~parllel.samplers.BackgroundBatch`
  with its policy lag (:class:`~parllel.samplers.BackgroundSampler`,
  :class:`~parllel.distributed.RaySampler`); the runners tell the two kinds
  apart by this class.
- :class:`EvalSource`: an evaluation sampler (:class:`~parllel.samplers.EvalSampler`).
- :class:`WeightPublisher`: the learner's side of shared weights (a
  ``TorchHandler`` after ``share_weights()``; a RaySampler publishes itself).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from parllel.cages import TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.background_batch import BackgroundBatch
from parllel.timing import PhaseTimes
from parllel.tree import ArrayDict

__all__ = ["AsyncSampler", "EvalSource", "TrainingSampler", "WeightPublisher"]


@runtime_checkable
class TrainingSampler(Protocol):
    """A sampler that collects each ``[T, B]`` batch in this process when asked."""

    @property
    def sample_tree(self) -> ArrayDict:
        """The tree each batch is written into (its ``reward`` is ``[T, B]``)."""
        ...

    @property
    def phase_times(self) -> PhaseTimes:
        """Seconds per phase of the batches collected so far."""
        ...

    @property
    def action_generator(self) -> object | None:
        """The generator the agent samples actions from (checkpointed with the
        run's RNG states), or None."""
        ...

    def collect_batch(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect one batch; return the tree and the episodes it finished."""
        ...

    def reset(self) -> None:
        """Reset every env; the next batch starts from there."""
        ...


@runtime_checkable
class EvalSource(Protocol):
    """An evaluation sampler: runs its episodes, returns their statistics."""

    def collect(self) -> list[TrajInfo]:
        """Run the evaluation episodes."""
        ...


@runtime_checkable
class WeightPublisher(Protocol):
    """Publishes the learner's weights to samplers in other processes."""

    @property
    def policy_version(self) -> int | None:
        """The newest published version (None: nothing shared yet)."""
        ...

    def publish_weights(self) -> int:
        """Publish the current weights as the next version; return it."""
        ...


class AsyncSampler(ABC):
    """A sampler that collects ahead in other processes while the learner trains.

    A runner passes the learner's policy version to :meth:`collect_batch`,
    checks and logs each batch's lag and the fault counters, publishes the
    weights after every iteration when :attr:`follows_weights`, and
    checkpoints the sampler's state as ``"sampler"``.
    """

    #: at most this many policy versions between the weights that collected
    #: a batch and the learner's (None: unbounded)
    max_lag: int | None
    #: seconds per phase, measured where the sampler runs
    phase_times: PhaseTimes

    @property
    @abstractmethod
    def sample_tree(self) -> ArrayDict:
        """A tree of the batches' layout (runners read the batch shape from it)."""

    @property
    @abstractmethod
    def follows_weights(self) -> bool:
        """Whether sampling follows published weights (then the learner must
        publish once per batch)."""

    @property
    @abstractmethod
    def started(self) -> bool:
        """Whether sampling started (at the first :meth:`collect_batch`)."""

    @abstractmethod
    def collect_batch(self, learner_version: int | None = None) -> BackgroundBatch:
        """The next batch, its lag behind ``learner_version`` checked."""

    @abstractmethod
    def fault_counts(self) -> dict[str, int]:
        """Faults survived so far, by name (``restarts``, ``dropped_batches``, ...)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """The samplers' transform state as of the newest batch."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the transform state before sampling starts."""

    def reset(self) -> None:
        """Nothing to do before sampling starts (the sampler resets its envs
        at its first batch; runners call this when resuming).

        Raises:
            ConfigError: sampling already started.
        """
        self._refuse_started("reset")

    def _refuse_started(self, call: str) -> None:
        """Raise ConfigError naming ``call`` if sampling started."""
        if self.started:
            raise ConfigError(
                f"a {type(self).__name__} cannot {call} once sampling started: "
                "call it before the first collect_batch (e.g. to restore a "
                "checkpoint)"
            )

    @abstractmethod
    def close(self) -> None:
        """Stop sampling and free what the sampler holds."""
