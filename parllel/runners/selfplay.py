"""SelfPlayCallback: adds learner snapshots to the pool and logs self-play metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parllel.errors import ConfigError
from parllel.multiagent.selfplay import SelfPlay
from parllel.runners.callbacks import Callback


class SelfPlayCallback(Callback):
    """Runner callback for self-play: snapshots and metrics.

    After every ``snapshot_interval`` updates it adds
    ``snapshot_learner()`` to the pool (at the runner's env step), and after
    every update it adds :meth:`SelfPlay.metrics
    <parllel.multiagent.SelfPlay.metrics>` (``selfplay/...``) to the
    metrics the runner logs. At the start of training it fills an empty pool
    with a first snapshot. The pool is checkpointed with the SelfPlay: pass
    it to the runner as a checkpoint object (``checkpoint_objects={...,
    "selfplay": selfplay}``); callbacks are not checkpointed.

    Args:
        selfplay: the :class:`~parllel.multiagent.SelfPlay` handler.
        snapshot_learner: returns a frozen snapshot of the learner (e.g.
            ``lambda: snapshot_state(agent)``); default: the SelfPlay's.
        snapshot_interval: updates between snapshots.

    Example:
        >>> callback = SelfPlayCallback(selfplay, snapshot_interval=10)
        >>> runner = OnPolicyRunner(sampler, ppo, total_steps, callbacks=[callback],
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
