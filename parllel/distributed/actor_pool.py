"""The Ray actors of a RaySampler: waiting on them, their (re)starts, their faults."""

from __future__ import annotations

import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NoReturn

from parllel.distributed.actor import ActorBatch, ActorInfo
from parllel.distributed.faults import (
    actor_label,
    died_error,
    is_actor_death,
    is_final_death,
    not_started_error,
    plain_text,
    raised_error,
    wait_ready,
)
from parllel.distributed.lifetime import free_dead_segments
from parllel.errors import (
    DistributedSamplerError,
    ParllelWarning,
)

__all__ = ["ActorPool"]

_FIRST_RETRY_SECONDS = 0.05  # then doubling, up to 1 s


class ActorPool:
    """The actors of a :class:`~parllel.distributed.RaySampler` and their faults.

    Args:
        ray: the ray module.
        actors: the actor handles (filled by the sampler as it creates them).
        infos: actor index -> ``(pid, node id)`` (shared with the sampler's
            shutdown, which frees a dead actor's segments).
        max_restarts: how often Ray restarts each actor.
        start_timeout: seconds an actor may take to build its sampler (None:
            no limit).
        timeout_seconds: seconds after which a pending batch or build is
            reported (None: never).
        close: closes the sampler before an error is raised.

    Attributes:
        restarts: actor restarts so far (a fault counter of the sampler).
        dropped_batches: batches lost to a failed actor (a fault counter).
        timeouts: pending batches or builds reported late (a fault counter).
        node_ids: each actor's node id, once every actor built its sampler.
        incarnations: each actor's incarnation (a new one after a restart).
    """

    def __init__(
        self,
        ray: Any,
        actors: list[Any],
        infos: dict[int, tuple[int, str | None]],
        *,
        max_restarts: int,
        start_timeout: float | None,
        timeout_seconds: float | None,
        close: Callable[[], None],
    ) -> None:
        self.ray = ray
        self.actors = actors
        self.infos = infos
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        self.timeout_seconds = timeout_seconds
        self.restarts = 0
        self.dropped_batches = 0
        self.timeouts = 0
        self.node_ids: list[str | None] | None = None
        self.incarnations: list[str] = []
        # a weak reference: the sampler's finalizer runs at its garbage collection
        self._close_ref = weakref.WeakMethod(close)

    def _close(self) -> None:
        close = self._close_ref()
        if close is not None:
            close()

    def label(self, index: int) -> str:
        """How messages name actor ``index`` (with its node, once known)."""
        node_ids = self.node_ids
        return actor_label(index, node_ids[index] if node_ids else None)

    def wait(
        self,
        ref: Any,
        index: int,
        what: str,
        limit: float | None = None,
        stacklevel: int = 6,
    ) -> bool:
        """Wait for ``ref`` (reporting every ``timeout_seconds``); return
        whether it is ready (False after ``limit`` s)."""

        def report(waited: float) -> None:
            self.timeouts += 1
            warnings.warn(
                f"{self.label(index)} has not {what} after {waited:.4g} s "
                f"(timeout_seconds={self.timeout_seconds}, timeout "
                f"{self.timeouts}); waiting on",
                ParllelWarning,
                stacklevel=stacklevel,
            )

        return wait_ready(self.ray, ref, self.timeout_seconds, report, limit)

    def not_started(self, index: int, restarted: bool) -> DistributedSamplerError:
        """Close the sampler; the error for an actor past ``start_timeout``."""
        assert self.start_timeout is not None
        label = self.label(index)
        self._close()
        return not_started_error(label, index, self.start_timeout, restarted)

    def describe(self, index: int) -> ActorInfo:
        """Wait (up to ``start_timeout`` s) for actor ``index`` to build its
        sampler; return what it reports about it."""
        ray = self.ray
        try:
            ref = self.actors[index].describe.remote()
            built = self.wait(ref, index, "built its sampler", self.start_timeout)
            info: ActorInfo | None = ray.get(ref) if built else None
        except Exception as error:
            raise DistributedSamplerError(
                f"{self.label(index)} could not build its sampler: "
                f"{plain_text(str(error))}",
                index,
                worker_traceback=plain_text(str(error)),
            ) from None
        if info is None:
            raise self.not_started(index, restarted=False)
        self.infos[index] = (info.pid, info.node_id)
        return info

    def fail(self, index: int, error: BaseException) -> NoReturn:
        """Close the sampler and raise for actor ``index``'s ``error``:
        :class:`~parllel.errors.DistributedSamplerError` if Ray will not
        restart it, else the error its code raised."""
        label = self.label(index)
        self._close()
        if is_final_death(self.ray, error):
            raise died_error(error, label, index, self.max_restarts)
        raise raised_error(self.ray, error, label, index) from None

    def await_restart(self, index: int) -> None:
        """Wait (up to ``start_timeout`` s) until actor ``index`` answers a
        call queued behind its restart (its sampler built); ask again, a
        little later each time, while Ray has not seen it die yet.

        Raises:
            DistributedSamplerError: Ray does not restart it.
            DistributedSamplerError: it raised, or has not answered within
                ``start_timeout`` s.
        """
        ray, pause = self.ray, _FIRST_RETRY_SECONDS
        deadline = None
        if self.start_timeout is not None:
            deadline = time.monotonic() + self.start_timeout
        while True:
            limit = None if deadline is None else deadline - time.monotonic()
            ref = self.actors[index].describe.remote()
            what = "built its sampler after a restart"
            if not self.wait(ref, index, what, limit, stacklevel=8):
                raise self.not_started(index, restarted=True)
            try:
                ray.get(ref)
                return
            except Exception as error:
                if not is_actor_death(ray, error) or is_final_death(ray, error):
                    self.fail(index, error)
            time.sleep(pause)
            pause = min(2 * pause, 1.0)

    def note_incarnation(self, index: int, result: ActorBatch) -> None:
        """Count and report a restart if ``result`` comes from a new incarnation."""
        if result.incarnation == self.incarnations[index]:
            return
        self.incarnations[index] = result.incarnation
        self.restarts += 1
        old_pid, node_id = self.infos[index]
        self.infos[index] = (result.pid, node_id)
        free_dead_segments(
            old_pid, node_id, self.ray.get_runtime_context().get_node_id()
        )
        warnings.warn(
            f"{self.label(index)} died and was restarted (restart {self.restarts}, "
            f"max_restarts={self.max_restarts} per actor); its envs start from "
            f"reset ({self.dropped_batches} actor batches dropped so far)",
            ParllelWarning,
            stacklevel=4,
        )
