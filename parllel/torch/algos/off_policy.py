"""Pieces shared by the torch off-policy algorithms: batches, target networks,
the update loop (update counts and metrics: :mod:`parllel.replays.updates`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from parllel.errors import ParllelError
from parllel.replays.updates import Replay, mean_metrics, takes_priorities
from parllel.torch.transfer import batch_to_device
from parllel.torch.utils import numpy_to_torch_tree

__all__ = [
    "TargetAverager",
    "hard_update",
    "polyak_update",
    "replay_batch_to_torch",
    "run_updates",
]


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
