"""What an off-policy algorithm needs around its updates, for any backend:
how many updates a call runs, the replay it samples from, and the averaging
of per-update metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeGuard

import numpy as np

from parllel.errors import ConfigError
from parllel.replays.ratio import ReplayRatio
from parllel.replays.transitions import ReplayBatch
from parllel.validation import check_count

__all__ = [
    "PrioritizedReplayLike",
    "Replay",
    "UpdateCount",
    "mean_metrics",
    "takes_priorities",
]


class Replay(Protocol):
    """What off-policy algorithms need from a replay (see :mod:`parllel.replays`)."""

    def sample(self) -> ReplayBatch:
        """A :class:`~parllel.replays.transitions.ReplayBatch` of numpy arrays."""
        ...


class PrioritizedReplayLike(Replay, Protocol):
    """A replay that also takes new priorities (:class:`~parllel.replays.PrioritizedReplay`)."""

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of the sampled ``indices`` (``|TD error|``)."""
        ...


def takes_priorities(replay: Replay) -> TypeGuard[PrioritizedReplayLike]:
    """True if ``replay`` has ``update_priorities`` (a prioritized replay)."""
    return hasattr(replay, "update_priorities")


class UpdateCount:
    """How many gradient updates one ``optimize`` call runs.

    Either a fixed ``updates_per_optimize``, or a replay ratio (updates per
    environment step, fractions carried over): then ``optimize`` must be told
    the number of new environment steps.

    Example:
        >>> count = UpdateCount(None, replay_ratio=0.5)
        >>> count(new_steps=6)
        3

    Args:
        updates_per_optimize: fixed updates per call (default 1 when no ratio).
        replay_ratio: gradient updates per environment step, over all envs.

    Raises:
        ConfigError: both or an invalid value given.
    """

    def __init__(
        self, updates_per_optimize: int | None, replay_ratio: float | None
    ) -> None:
        if updates_per_optimize is not None and replay_ratio is not None:
            raise ConfigError("give updates_per_optimize or replay_ratio, not both")
        if updates_per_optimize is not None:
            check_count("updates_per_optimize", updates_per_optimize)
        self.fixed = 1 if updates_per_optimize is None else updates_per_optimize
        self.ratio = None if replay_ratio is None else ReplayRatio(replay_ratio)

    def __call__(self, new_steps: int | None) -> int:
        """Updates to run now."""
        if self.ratio is None:
            return self.fixed
        if new_steps is None:
            raise ConfigError(
                "with a replay_ratio, pass optimize(replay, new_steps=T * B) so the "
                "number of updates can follow the environment steps"
            )
        return self.ratio.updates(new_steps)

    def state_dict(self) -> dict[str, Any]:
        """The replay ratio's carry (empty when fixed)."""
        return {} if self.ratio is None else self.ratio.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        if self.ratio is not None:
            self.ratio.load_state_dict(state)


def mean_metrics(history: list[dict[str, float]]) -> dict[str, float]:
    """Average per-update metrics over the updates of one ``optimize`` call.

    A metric some updates lack (e.g. SAC's actor loss with a policy delay) is
    averaged over the updates that report it; ``updates`` counts them all.
    """
    if not history:
        return {"updates": 0.0}
    keys = dict.fromkeys(key for h in history for key in h)
    metrics = {}
    for key in keys:
        values = [h[key] for h in history if key in h]
        metrics[key] = sum(values) / len(values)
    metrics["updates"] = float(len(history))
    return metrics
