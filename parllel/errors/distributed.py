"""Errors of sampling on Ray (:mod:`parllel.distributed`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError

__all__ = [
    "DistributedSamplerError",
]


class DistributedSamplerError(ParllelError, RuntimeError):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` raised (its
    sampler, its builder, or loading the published weights), or died more often
    than its ``max_restarts`` allow.

    Attributes:
        actor_index: the actor's index (0 to ``n_actors - 1``).
        worker_traceback: the formatted traceback from the actor.
    """

    def __init__(
        self, message: str, actor_index: int, worker_traceback: str = ""
    ) -> None:
        super().__init__(message)
        self.actor_index = actor_index
        self.worker_traceback = worker_traceback
