"""How a RaySampler reads Ray's errors: an actor that died, or code that raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parllel.errors import DistributedSamplerDiedError, DistributedSamplerError


def actor_label(index: int, node_id: str | None = None) -> str:
    """``"sampler actor 1 (node 3f2a…)"``: how reports name an actor."""
    node = f" (node {node_id[:12]})" if node_id else ""
    return f"sampler actor {index}{node}"


def is_actor_death(ray: Any, error: BaseException) -> bool:
    """Whether ``error`` says the actor (its process) is gone or restarting,
    rather than that its code raised."""
    return isinstance(error, ray.exceptions.RayActorError)


def is_final_death(ray: Any, error: BaseException) -> bool:
    """Whether the actor is dead for good: Ray will not restart it (its
    ``max_restarts`` are used up, or its builder raised)."""
    return isinstance(error, ray.exceptions.ActorDiedError)


def raised_error(
    ray: Any, error: BaseException, label: str, index: int
) -> DistributedSamplerError:
    """A :class:`DistributedSamplerError` for an error the actor's code raised."""
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause if error.cause is not None else error
        worker_traceback = str(error)
        summary = f"{type(cause).__name__}: {cause}".splitlines()[0]
    else:
        worker_traceback, summary = str(error), f"{type(error).__name__}"
    return DistributedSamplerError(
        f"{label} raised {summary}\n--- its traceback ---\n{worker_traceback}",
        index,
        worker_traceback=worker_traceback,
    )


def died_error(
    error: BaseException, label: str, index: int, max_restarts: int
) -> DistributedSamplerDiedError:
    """A :class:`DistributedSamplerDiedError` for an actor Ray will not restart."""
    return DistributedSamplerDiedError(
        f"{label} died and is not restarted (max_restarts={max_restarts} per "
        f"actor): {error}",
        index,
        worker_traceback=str(error),
    )


def wait_ready(
    ray: Any, ref: Any, period: float | None, report: Callable[[float], None]
) -> None:
    """Block until ``ref`` is ready, waking every second (so Ctrl-C and signal
    handlers run); call ``report(period)`` after each ``period`` s waited."""
    waited = 0.0
    while True:
        step = 1.0 if period is None else min(1.0, period - waited)
        ready, _ = ray.wait([ref], timeout=step)
        if ready:
            return
        waited += step
        if period is not None and waited >= period:
            waited = 0.0
            report(period)
