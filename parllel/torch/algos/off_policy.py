"""Pieces shared by off-policy algorithms: update counts, batches, target networks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeGuard

import numpy as np
import torch
from torch import nn

from parllel.errors import ConfigError, ParllelError
from parllel.replays.ratio import ReplayRatio
from parllel.replays.transitions import ReplayBatch
from parllel.torch.transfer import batch_to_device
from parllel.torch.utils import numpy_to_torch_tree
from parllel.validation import check_count

__all__ = [
    "PrioritizedReplayLike",
    "Replay",
    "TargetAverager",
    "UpdateCount",
    "hard_update",
    "polyak_update",
    "replay_batch_to_torch",
    "run_updates",
    "takes_priorities",
]


class Replay(Protocol):
    """What off-policy algorithms need from a replay (see :mod:`parllel.replays`)."""

    def sample(self) -> ReplayBatch:
        """A :class:`~parllel.replays.ReplayBatch` of numpy arrays."""
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

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        if self.ratio is not None:
            self.ratio.load_state_dict(state)


def replay_batch_to_torch(batch: Any, device: torch.device | None) -> Any:
    """A numpy ``ReplayBatch`` as tensors (zero-copy on CPU), on ``device``."""
    batch = numpy_to_torch_tree(batch)
    return batch_to_device(batch, device)


class TargetAverager:
    """Polyak-average a target network towards its online network, cheaply.

    The tensor lists are gathered once; each call is one fused
    ``torch._foreach_lerp_`` over the floating-point tensors (others, e.g.
    counters, are copied). Build a new one if either module's tensors are
    replaced.

    Example:
        >>> average = TargetAverager(target_critic, critic)
        >>> average(0.005)   # target <- 0.995 * target + 0.005 * critic

    Args:
        target: the target network.
        online: the network it follows (same structure).
    """

    def __init__(self, target: nn.Module, online: nn.Module) -> None:
        self.floats: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        self.others: list[tuple[torch.Tensor, torch.Tensor]] = []
        for target_tensor, online_tensor in _tensors(target, online):
            if target_tensor.is_floating_point():
                self.floats[0].append(target_tensor)
                self.floats[1].append(online_tensor)
            else:
                self.others.append((target_tensor, online_tensor))

    @torch.no_grad()
    def __call__(self, tau: float) -> None:
        """``target <- (1 - tau) * target + tau * online``."""
        if self.floats[0]:
            torch._foreach_lerp_(self.floats[0], self.floats[1], tau)
        for target_tensor, online_tensor in self.others:
            target_tensor.copy_(online_tensor)


def polyak_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online``, parameters and buffers.

    One-off form of :class:`TargetAverager` (which caches the tensor lists).
    """
    TargetAverager(target, online)(tau)


@torch.no_grad()
def hard_update(target: nn.Module, online: nn.Module) -> None:
    """Copy every parameter and buffer of ``online`` into ``target``."""
    for target_tensor, online_tensor in _tensors(target, online):
        target_tensor.copy_(online_tensor)


def _tensors(
    target: nn.Module, online: nn.Module
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    yield from zip(target.parameters(), online.parameters())
    yield from zip(target.buffers(), online.buffers())


def mean_metrics(history: list[dict[str, float]]) -> dict[str, float]:
    """Average per-update metrics over the updates of one ``optimize`` call.

    A metric some updates lack (e.g. SAC's actor loss with a policy delay) is
    averaged over the updates that report it.
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


def run_updates(
    replay: Replay,
    n_updates: int,
    device: torch.device | None,
    update: Callable[[Any], tuple[dict[str, float], torch.Tensor | None]],
) -> dict[str, float]:
    """``n_updates`` calls of ``update``, each on a fresh batch from ``replay``.

    ``update(batch)`` returns the update's metrics and the new priorities of
    the batch's samples (``[batch]``, or None), which a prioritized replay
    (with ``update_priorities``) receives.

    Returns:
        The metrics averaged over the updates (:func:`mean_metrics`).

    Raises:
        ParllelError: a prioritized replay, but ``update`` gave no priorities.
    """
    history = []
    prioritized = replay if takes_priorities(replay) else None
    for _ in range(n_updates):
        batch = replay_batch_to_torch(replay.sample(), device)
        metrics, priorities = update(batch)
        history.append(metrics)
        if prioritized is not None:
            if priorities is None:
                name = getattr(update, "__qualname__", repr(update))
                raise ParllelError(
                    f"{name}() gave no new priorities for the prioritized replay"
                )
            prioritized.update_priorities(
                batch.indices.cpu().numpy(), priorities.cpu().numpy()
            )
    return mean_metrics(history)
