"""Errors and warnings of sampling on Ray (:mod:`parllel.distributed`)."""

from __future__ import annotations

from parllel.errors.base import ParllelError, ParllelWarning

__all__ = [
    "DistributedSamplerDiedError",
    "DistributedSamplerError",
    "SamplerActorRestartWarning",
    "SamplerActorTimeoutWarning",
]


class DistributedSamplerError(ParllelError, RuntimeError):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` raised (its
    sampler, its builder, or loading the published weights).

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


class DistributedSamplerDiedError(DistributedSamplerError):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` died more
    often than its ``max_restarts`` allow."""


class SamplerActorTimeoutWarning(ParllelWarning):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` has not
    returned its batch within ``timeout_seconds`` (the learner keeps waiting)."""


class SamplerActorRestartWarning(ParllelWarning):
    """A sampler actor of a :class:`~parllel.distributed.RaySampler` died and
    Ray restarted it; its unfinished batch was dropped and collected again by
    the new actor, whose envs start from reset."""
