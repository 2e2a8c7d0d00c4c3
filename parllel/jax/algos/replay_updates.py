"""What a JAX off-policy algorithm does around its compiled update: the replay
batches' arrays stacked ``[K, batch, ...]`` for ``K`` updates in one call,
and an ``optimize`` call's updates sampled and run (one call, or one call per
update when a prioritized replay wants each update's new priorities)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from parllel.replays.transitions import ReplayBatch
from parllel.replays.updates import Replay, takes_priorities

__all__ = ["ReplayArrays", "run_update_calls"]


class ReplayArrays(NamedTuple):
    """The fields of a :class:`~parllel.replays.transitions.ReplayBatch` an update reads,
    ``[batch, ...]`` (or ``[K, batch, ...]`` for K updates), as jit arguments."""

    observation: Any
    action: Any
    reward: Any
    next_observation: Any
    terminated: Any
    discount: Any
    weights: Any

    @classmethod
    def from_replay(cls, batch: ReplayBatch, action_dtype: Any) -> ReplayArrays:
        """The fields of a numpy ``ReplayBatch`` (actions as ``action_dtype``,
        float32 rewards, discounts and weights, bool terminations)."""
        return cls(
            batch.observation,
            np.asarray(batch.action, action_dtype),
            np.asarray(batch.reward, np.float32),
            batch.next_observation,
            np.asarray(batch.terminated, bool),
            np.asarray(batch.discount, np.float32),
            np.asarray(batch.weights, np.float32),
        )

    @classmethod
    def stack(cls, batches: Sequence[ReplayBatch], action_dtype: Any) -> ReplayArrays:
        """``K`` replay batches as one ``[K, batch, ...]`` batch (one batch:
        views with a leading axis of 1, no copy)."""
        arrays = [cls.from_replay(batch, action_dtype) for batch in batches]
        if len(arrays) == 1:
            return jax.tree.map(lambda leaf: leaf[np.newaxis], arrays[0])
        return jax.tree.map(lambda *leaves: np.stack(leaves), *arrays)


def run_update_calls(
    replay: Replay,
    count: int,
    update_batches: Callable[[Sequence[ReplayBatch]], Mapping[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """Sample ``count`` batches from ``replay`` and update on them.

    ``update_batches(batches)`` runs one update per batch in one compiled
    call and returns per-update metrics (arrays ``[K, ...]``, among them
    ``td_error [K, batch]``). With a prioritized replay every update is a
    call of its own, so the next batch is drawn with the new priorities
    ``|TD error|`` of the last.

    Returns:
        The metrics of every update, concatenated ``[count, ...]``.
    """
    if not takes_priorities(replay):
        return dict(update_batches([replay.sample() for _ in range(count)]))
    history = []
    for _ in range(count):
        batch = replay.sample()
        metrics = update_batches([batch])
        replay.update_priorities(batch.indices, metrics["td_error"][-1])
        history.append(metrics)
    return {name: np.concatenate([h[name] for h in history]) for name in history[0]}
