"""Where a runner's batches come from: a synchronous or an asynchronous sampler.

The runner holds one of these two and never asks its sampler what kind it
is again: :class:`SyncBatches` collects in this process; :class:`AsyncBatches`
passes the learner's policy version, keeps each batch's lag for the log
line and reports the sampler's fault counters.

With an :class:`~parllel.samplers.protocols.AsyncSampler` (a
:class:`~parllel.samplers.BackgroundSampler`, a
:class:`~parllel.distributed.RaySampler`) the next batch is collected while
the algorithm trains: pass the learner's handler as the runner's
``publisher`` and the runner publishes the weights after every iteration,
checks each batch's policy lag against the sampler's ``max_lag`` and logs
it (``async/lag_min``, ``async/lag_mean``, ``async/lag_max`` over the
batches since the last log line, ``async/policy_version``, and the
background process's ``async/restarts`` and ``async/dropped_batches``; a
RaySampler's ``async/timeouts`` too). The sampler's transform state is
checkpointed as ``"sampler"``; the batch being collected when a checkpoint
is written is not saved: a resumed run starts from reset envs, as a
synchronous one does.
"""

from __future__ import annotations

from typing import Any

from parllel import fields
from parllel.cages import TrajInfo
from parllel.errors import ConfigError
from parllel.samplers.protocols import AsyncSampler, TrainingSampler, WeightPublisher
from parllel.tree import ArrayDict

__all__ = ["AsyncBatches", "SyncBatches", "batches_of", "steps_per_batch"]


def steps_per_batch(sample_tree: ArrayDict) -> int:
    """Env steps in one ``[T, B]`` batch of ``sample_tree``: T * B."""
    reward = sample_tree[fields.REWARD]
    return int(reward.shape[0] * reward.shape[1])


class SyncBatches:
    """Batches a :class:`~parllel.samplers.protocols.TrainingSampler` collects
    when asked, in this process."""

    def __init__(self, sampler: TrainingSampler) -> None:
        self.sampler = sampler
        self.steps_per_batch = steps_per_batch(sampler.sample_tree)

    def collect(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Collect the next batch; return it and the episodes it finished."""
        return self.sampler.collect_batch()

    def lag_metrics(self) -> dict[str, float]:
        """No lag: every batch is collected with the newest weights."""
        return {}

    def forget_lags(self) -> None:
        """Nothing kept."""

    def fault_metrics(self) -> dict[str, float]:
        """No faults to count."""
        return {}

    def rng_generators(self) -> dict[str, Any]:
        """The action generator (a ``torch.Generator``: any
        :class:`~parllel.backends.StatefulGenerator`), if the agent samples
        from one of its own (checkpointed with the run's RNG states)."""
        generator = self.sampler.action_generator
        return {} if generator is None else {"actions": generator}

    def check_loadable(self) -> None:
        """A synchronous sampler can load a checkpoint at any time."""


class AsyncBatches:
    """Batches an :class:`~parllel.samplers.protocols.AsyncSampler` collected
    ahead, each with its policy lag behind ``publisher``'s version."""

    def __init__(
        self, sampler: AsyncSampler, publisher: WeightPublisher | None
    ) -> None:
        self.sampler = sampler
        self.publisher = publisher
        self.steps_per_batch = steps_per_batch(sampler.sample_tree)
        self._lags: list[tuple[int, float, int]] = []

    def collect(self) -> tuple[ArrayDict, list[TrajInfo]]:
        """Take the next batch (checking its lag); return it and its episodes."""
        version = None if self.publisher is None else self.publisher.policy_version
        result = self.sampler.collect_batch(learner_version=version)
        if result.lag is not None:
            assert result.lag_min is not None and result.lag_mean is not None
            self._lags.append((result.lag_min, result.lag_mean, result.lag))
        return result.sample_tree, result.completed

    def lag_metrics(self) -> dict[str, float]:
        """``async/lag_min``, ``lag_mean`` and ``lag_max`` over the batches
        since :meth:`forget_lags` (none without a publisher)."""
        lags = self._lags
        if not lags:
            return {}
        return {
            "async/lag_min": float(min(lag[0] for lag in lags)),
            "async/lag_mean": sum(lag[1] for lag in lags) / len(lags),
            "async/lag_max": float(max(lag[2] for lag in lags)),
        }

    def forget_lags(self) -> None:
        """Start the next log line's lags (after a log line)."""
        self._lags.clear()

    def fault_metrics(self) -> dict[str, float]:
        """The sampler's fault counters as ``async/<name>`` (restarts,
        dropped batches; a RaySampler's timeouts)."""
        return {
            f"async/{name}": float(count)
            for name, count in self.sampler.fault_counts().items()
        }

    def rng_generators(self) -> dict[str, Any]:
        """None here: the sampler's generators travel with its state."""
        return {}

    def check_loadable(self) -> None:
        """Raise once sampling started: the batches collected ahead would mix
        the old run's policy with the restored one.

        Raises:
            ConfigError: the sampler has started sampling.
        """
        if self.sampler.started:
            raise ConfigError(
                "load a checkpoint before the first batch: this runner's "
                "background sampler has started sampling (call runner.load() "
                "before runner.run())"
            )


def batches_of(
    sampler: TrainingSampler | AsyncSampler, publisher: WeightPublisher | None
) -> SyncBatches | AsyncBatches:
    """The batch source for ``sampler``, after checking it fits ``publisher``.

    Raises:
        ConfigError: ``publisher`` has published no weights; the sampler
            publishes its own weights but ``publisher`` is another object; or
            an asynchronous sampler follows weights and nobody publishes them.
    """
    if publisher is not None and publisher.policy_version is None:
        raise ConfigError(
            "publisher needs published weights: call publisher.share_weights() "
            "(and pass the weights to the sampler) first"
        )
    if (
        publisher is not None
        and isinstance(sampler, WeightPublisher)
        and publisher is not sampler
    ):
        raise ConfigError(
            f"a {type(sampler).__name__} publishes the weights itself: pass "
            "publisher=sampler (the sampler), not another object, or its "
            "actors never receive new weights"
        )
    if not isinstance(sampler, AsyncSampler):
        return SyncBatches(sampler)
    if publisher is None and sampler.follows_weights:
        raise ConfigError(
            "the sampler's handlers follow the learner's weights: pass the "
            "publisher (the learner's handler, or the RaySampler itself) as "
            "publisher= so the runner publishes them after every update "
            "(without, sampling would keep the first weights or wait for new "
            "ones forever)"
        )
    return AsyncBatches(sampler, publisher)
