"""How a RaySampler reads Ray's errors: an actor that died, or code that raised."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from parllel.errors import DistributedSamplerError


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


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def plain_text(text: str) -> str:
    """``text`` without the terminal colour codes Ray puts in its errors."""
    return _ANSI_ESCAPE.sub("", text)


def raised_error(
    ray: Any, error: BaseException, label: str, index: int
) -> DistributedSamplerError:
    """A :class:`DistributedSamplerError` for an error the actor's code raised."""
    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause if error.cause is not None else error
        worker_traceback = plain_text(str(error))
        summary = plain_text(f"{type(cause).__name__}: {cause}").splitlines()[0]
    else:
        worker_traceback, summary = plain_text(str(error)), type(error).__name__
    return DistributedSamplerError(
        f"{label} raised {summary}\n--- its traceback ---\n{worker_traceback}",
        index,
        worker_traceback=worker_traceback,
    )


def died_error(
    error: BaseException, label: str, index: int, max_restarts: int
) -> DistributedSamplerError:
    """A :class:`DistributedSamplerError` for an actor Ray will not restart."""
    return DistributedSamplerError(
        f"{label} died and is not restarted (max_restarts={max_restarts} per "
        f"actor): {plain_text(str(error))}",
        index,
        worker_traceback=plain_text(str(error)),
    )


def not_started_error(
    label: str, index: int, start_timeout: float, restarted: bool
) -> DistributedSamplerError:
    """A :class:`DistributedSamplerError` for an actor that has not built its
    sampler (after a restart, if ``restarted``) within ``start_timeout`` s."""
    when = "after Ray restarted it " if restarted else ""
    return DistributedSamplerError(
        f"{label} has not built its sampler {when}within start_timeout="
        f"{start_timeout} s: its builder hangs, or the cluster lacks the "
        "resources the actor asks for (num_cpus_per_actor, actor_options)",
        index,
    )


def wait_ready(
    ray: Any,
    ref: Any,
    period: float | None,
    report: Callable[[float], None],
    limit: float | None = None,
) -> bool:
    """Block until ``ref`` is ready, waking every second (so Ctrl-C and signal
    handlers run); after each ``period`` s waited, call ``report(total)`` with
    the seconds waited so far. Return whether it is ready: False once
    ``limit`` s were waited (None: no limit; ``ref`` is looked at once even
    if ``limit`` is 0)."""
    waited = since_report = 0.0
    while True:
        step = 1.0 if period is None else min(1.0, period - since_report)
        if limit is not None:
            step = max(0.0, min(step, limit - waited))
        ready, _ = ray.wait([ref], timeout=step)
        if ready:
            return True
        waited += step
        since_report += step
        if limit is not None and waited >= limit:
            return False
        if period is not None and since_report >= period:
            since_report = 0.0
            report(waited)
