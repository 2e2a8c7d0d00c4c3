"""SelfPlayCallback: the runner's side of self-play (snapshots, metrics).

Self-play lives in :mod:`parllel.multiagent.selfplay`; this callback stays
here because it subclasses the runners' :class:`~parllel.runners.Callback`,
and ``parllel.multiagent`` sits below ``parllel.runners`` in the layers
(docs/multiagent.md "Self-play").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parllel.errors import ConfigError
from parllel.multiagent.selfplay import SelfPlay
from parllel.runners.callbacks import Callback


class SelfPlayCallback(Callback):
    """Runner callback for self-play: snapshots and metrics.

    Every ``snapshot_interval`` updates it adds ``snapshot_learner()`` (default:
    the SelfPlay's) to the pool, fills an empty pool when training starts,
    and adds :meth:`SelfPlay.metrics <parllel.multiagent.SelfPlay.metrics>`
    to every update's metrics. Checkpoint the ``selfplay`` itself, as a
    checkpoint object of the runner (callbacks are not checkpointed).

    Example:
        >>> runner = OnPolicyRunner(sampler, ppo, total_steps,
        ...                         callbacks=[SelfPlayCallback(selfplay)],
        ...                         checkpoint_objects={"selfplay": selfplay, ...})
    """

    def __init__(
        self,
        selfplay: SelfPlay,
        snapshot_learner: Callable[[], Any] | None = None,
        *,
        snapshot_interval: int = 10,
    ) -> None:
        if int(snapshot_interval) < 1:
            raise ConfigError(
                f"snapshot_interval must be >= 1 updates, got {snapshot_interval}"
            )
        snapshot_learner = snapshot_learner or selfplay.snapshot_learner
        if snapshot_learner is None:
            raise ConfigError(
                "SelfPlayCallback needs snapshot_learner (or a SelfPlay built with one)"
            )
        self.selfplay = selfplay
        self.snapshot_learner = snapshot_learner
        self.snapshot_interval = int(snapshot_interval)

    def on_train_start(self, runner: Any) -> None:
        """Fill an empty pool with the learner's first snapshot."""
        if not len(self.selfplay.pool):
            self.selfplay.pool.add(self.snapshot_learner(), step=runner.env_steps)

    def on_update_end(self, runner: Any, metrics: dict[str, float]) -> None:
        """Snapshot the learner every ``snapshot_interval`` updates; add the metrics."""
        if runner.updates % self.snapshot_interval == 0:
            self.selfplay.pool.add(self.snapshot_learner(), step=runner.env_steps)
        metrics.update(self.selfplay.metrics())
