"""BackgroundSampler: a sampler in its own process, filling a TreeRing while the learner trains.

The user's builder function runs in the background process and returns a
sampler (cages, their workers and the handler are created there). That
process sends the layout of the sampler's tree; the learner allocates K
shared trees of that layout (it owns every segment, so nothing outlives it
even if the background process is killed) and sends them back; then the
background process fills them in turn (:meth:`BatchSampler.use_tree
<parllel.samplers.base.BatchSampler.use_tree>` carries the batch boundary
from one tree to the next) and the learner reads them without a copy.

The background process builds the sampler at once but starts sampling only
at the first ``collect_batch``, so the learner can first restore a
checkpoint (:meth:`BackgroundSampler.load_state_dict`) and publish the
weights to start from.

If the sampler's handler follows shared weights (it has ``refresh_weights``
and ``policy_version``, like a TorchHandler after ``follow_weights``), and
the first batch is collected with version ``v0`` (the newest when sampling
starts), batch ``n`` is collected with version ``>= v0 + n - max_lag``: the
background process waits for that version before it starts the batch.
This assumes the learner publishes once per batch it trains on (the
runners do).

With ``max_restarts > 0``, a dead background process is replaced (see
:class:`BackgroundSampler`). Starting and hearing the process is in
:mod:`~parllel.samplers.background_launch`, its side in
:mod:`~parllel.samplers.background_process`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from multiprocessing import util
from typing import Any, cast

from parllel.arrays.shared_memory import remove_dead_owner_segments
from parllel.cages.child_processes import start_context
from parllel.cages.main_guard import check_main_guard
from parllel.errors import (
    BackgroundSamplerError,
    ConfigError,
    TreeRingError,
)
from parllel.samplers.background_batch import BackgroundBatch, checked_batch
from parllel.samplers.background_launch import (
    ProcessDied,
    ProcessReports,
    await_layout,
    deadlock_error,
    died_error,
    reported_error,
    shutdown,
    start_process,
    warn_restart,
    warn_unrecorded_versions,
)
from parllel.samplers.protocols import AsyncSampler
from parllel.samplers.tree_ring import Handover, TreeRing, allocate_like, tree_layout
from parllel.timing import PhaseTimes
from parllel.tree import ArrayDict

__all__ = ["BackgroundSampler"]


class _Restarted(Exception):
    """The learner started a new background process while waiting for a batch."""


class BackgroundSampler(AsyncSampler):
    """Runs a sampler in its own process over K >= 2 preallocated trees.

    Args:
        build_sampler: a picklable module-level function that builds the
            sampler (cages, handler and all) in the background process.
        *args: its picklable arguments (shared weights travel at process start).
        k: trees (>= 2; default ``max_lag + 1``, at least 2).
        max_lag: the most policy versions a batch may lag the learner (0:
            take turns, as synchronous sampling; None: never wait).
        start_method: start method of the background process.
        close_timeout: seconds :meth:`close` waits before terminating it.
        max_restarts: dead processes replaced before :meth:`collect_batch`
            raises :class:`~parllel.errors.BackgroundSamplerError` (default 0).

    Attributes: ``follows_weights``, ``deadlock_seconds`` (default 5),
    ``restarts``, ``dropped_batches`` and ``phase_times``. Policy lag, the
    restarts and the deadlock check: docs/async.md.

    Example:
        >>> with BackgroundSampler(build_sampler, weights, max_lag=1) as sampler:
        ...     batch = sampler.collect_batch(learner_version=handler.policy_version)
        ...     train(batch.sample_tree); handler.publish_weights()
    """

    def __init__(
        self,
        build_sampler: Callable[..., Any],
        *args: Any,
        k: int | None = None,
        max_lag: int | None = 0,
        start_method: str | None = None,
        close_timeout: float = 30.0,
        max_restarts: int = 0,
    ) -> None:
        if max_lag is not None and int(max_lag) < 0:
            raise ConfigError(f"max_lag must be >= 0 or None, got {max_lag}")
        if int(max_restarts) < 0:
            raise ConfigError(f"max_restarts must be >= 0, got {max_restarts}")
        self.max_lag = None if max_lag is None else int(max_lag)
        if k is None:
            k = max(2, (self.max_lag or 0) + 1)
        check_main_guard(
            start_context(start_method).get_start_method(),
            what="the background sampler's process is",
            instead="or use a synchronous sampler",
        )
        self.max_restarts = int(max_restarts)
        self.restarts = 0
        self.dropped_batches = 0
        self._build = (build_sampler, args)
        self._start_method = start_method
        self._close_timeout = close_timeout
        self._process: Any = None
        self._conn: Any = cast(Any, None)
        self._finalizer: Any = None
        self._ring: TreeRing | None = None
        self._reports = ProcessReports()
        self._holding = False
        self._closed = False
        self._started = False
        self._state_to_load: dict[str, Any] | None = None
        self._last_state: dict[str, Any] | None = None
        self._initial_state: dict[str, Any] = {}
        self.phase_times = PhaseTimes()
        self.deadlock_seconds = 5.0
        self._follows_weights = False
        self._generation = 0  # processes started - 1
        handover = Handover(k, start_method)
        trees: list[ArrayDict] = []
        try:
            _, layout, self._initial_state, self._follows_weights = self._launch(
                handover
            )
            warn_unrecorded_versions(layout, self._follows_weights)
            for _ in range(handover.k):
                trees.append(allocate_like(layout))
            self._ring = TreeRing(trees, handover=handover)
            self._conn.send(trees)
        except BaseException as exc:
            for tree in trees:
                tree.close()
            handover.close()
            self._closed = True
            if self._process is not None:
                shutdown(self._process, None, self._conn, close_timeout)
            if isinstance(exc, ProcessDied):
                raise died_error(exc.exitcode, None, self.max_restarts) from None
            raise
        self._watch()

    def _watch(self) -> None:
        """Close the ring and stop the current process at close, GC or exit."""
        self._finalizer = util.Finalize(
            self,
            shutdown,
            args=(self._process, self._ring, self._conn, self._close_timeout),
            exitpriority=10,  # before multiprocessing joins its children at exit
        )

    def _launch(
        self, handover: Handover, resume: tuple[int, int | None] | None = None
    ) -> tuple:
        """Start a background process; return its ``layout`` message (raises
        ProcessDied, or BackgroundSamplerError if the builder raised)."""
        self._process, self._conn = start_process(
            self._start_method, self._build, handover, self.max_lag, resume
        )
        if self._ring is not None:  # a restart: the ring exists already
            self._watch()
        message = await_layout(self._process, self._conn, self._close_timeout)
        if message[0] == "error":
            self._raise_reported(message)
        assert message[0] == "layout", message
        return message

    @property
    def pid(self) -> int | None:
        """Process id of the background process (a new one after a restart)."""
        return self._process.pid

    @property
    def follows_weights(self) -> bool:
        """Whether the sampler's handler follows shared weights (then the
        learner must publish once per batch)."""
        return self._follows_weights

    def fault_counts(self) -> dict[str, int]:
        """``restarts`` and ``dropped_batches`` so far."""
        return {"restarts": self.restarts, "dropped_batches": self.dropped_batches}

    @property
    def started(self) -> bool:
        """Whether sampling started (at the first :meth:`collect_batch`)."""
        return self._started

    @property
    def sample_tree(self) -> ArrayDict:
        """The ring's first tree (each batch is one of the ring's trees;
        runners read the batch shape from this one)."""
        return self.ring.trees[0]

    def state_dict(self) -> dict[str, Any]:
        """The state of the background sampler's transform and observation
        normalizer (e.g. running normalization statistics), as of the last
        batch :meth:`collect_batch` returned; before the first, what
        :meth:`load_state_dict` was given (else the state it was built with).

        Use it as a checkpoint object, and to give an evaluation sampler in
        the learner's process the same observation normalization.
        """
        if self._last_state is not None:
            return self._last_state
        if self._state_to_load is not None:
            return self._state_to_load
        return self._initial_state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the background sampler's transform and observation
        normalizer before sampling starts (when resuming a run).

        Raises:
            ConfigError: sampling already started (call it before the first
                :meth:`collect_batch`).
        """
        self._refuse_started("load_state_dict")
        self._state_to_load = dict(state)
        self._last_state = None

    @property
    def ring(self) -> TreeRing:
        """The trees the background process fills."""
        assert self._ring is not None
        return self._ring

    def _raise_reported(self, message: tuple) -> None:
        self.close()
        raise reported_error(message)

    def _read_messages(self) -> None:
        """Take in what the background process sent; raise its error report."""
        error = self._reports.read(self._conn)
        if error is not None:
            self._raise_reported(error)

    def _check_alive(self) -> None:
        """Raise if the background process reported an error; if it is gone,
        start another (up to ``max_restarts``) or raise."""
        self._read_messages()
        if not self._process.is_alive():
            self._restart(self._process.exitcode)

    def _restart(self, exitcode: int | None) -> None:
        """The process is gone: start another over the same trees, or raise
        BackgroundSamplerError once ``max_restarts`` are used up."""
        ring = self.ring
        while True:
            self._read_messages()  # raises if it reported an error before dying
            # a killed process leaves its segments: nobody else unlinks them
            remove_dead_owner_segments(self._process.pid)
            if self.restarts >= self.max_restarts:
                self.close()
                raise died_error(exitcode, self.restarts, self.max_restarts)
            self.restarts += 1
            dropped = self._forget_dead_process()
            self.dropped_batches += dropped
            warn_restart(exitcode, self.restarts, self.max_restarts, dropped)
            ring.handover = ring.handover.for_new_writer(
                self._holding, self._start_method
            )
            try:
                layout = self._launch(
                    ring.handover, resume=(ring.written, self._reports.first_version)
                )[1]
            except ProcessDied as died:  # died again before building its sampler
                exitcode = died.exitcode
                continue
            break
        if layout != tree_layout(ring.trees[0]):
            self.close()
            raise BackgroundSamplerError(
                "the restarted background sampler built a tree of another layout"
            )
        self._conn.send(ring.trees)
        if self._started:
            self._conn.send(("start", self._newest_state()))
        self._reports.waits = None
        self._generation += 1

    def _forget_dead_process(self) -> int:
        """Drop what the dead process left: its messages of batches it did not
        hand over, the tree it was filling (its cage workers may still write
        into it: replaced by a new one), its pipe. Return the number of
        batches dropped (0 or 1)."""
        ring, written = self.ring, self.ring.written
        dropped = self._reports.forget_unfinished(written)
        if dropped:
            ring.replace_tree(written % ring.k)
        self._finalizer.cancel()
        self._conn.close()
        return dropped

    def _newest_state(self) -> dict[str, Any] | None:
        """The sampler state of the newest batch handed over (for a restart)."""
        if self._reports.batches:
            return self._reports.batches[-1][3]
        return self._last_state if self._last_state is not None else self._state_to_load

    def _check_deadlock(self) -> None:
        """While the learner waits for a batch: raise if the background
        process has been waiting for weights the learner has not published."""
        self._check_alive()
        waits = self._reports.waits
        if waits is not None and time.monotonic() - waits[1] > self.deadlock_seconds:
            self.close()
            raise deadlock_error(waits[0], self.max_lag)

    def _begin_read(self) -> int:
        """The ring's next filled tree; waits again, on the new handover, if
        the process was restarted meanwhile."""
        while True:
            generation = self._generation

            def check(generation: int = generation) -> None:
                self._check_deadlock()
                if self._generation != generation:  # a new process, a new handover
                    raise _Restarted

            try:
                index = self.ring.begin_read(check_alive=check)
            except _Restarted:
                continue
            assert index is not None
            return index

    def _receive(self, kind: str) -> tuple:
        while not self._reports.batches:
            if self._conn.poll(0.1):
                self._check_alive()
            elif not self._process.is_alive():
                self._check_alive()
        message = self._reports.batches.popleft()
        assert message[0] == kind, message
        return message

    def collect_batch(self, learner_version: int | None = None) -> BackgroundBatch:
        """Give back the previous batch's tree and return the next filled one.

        Blocks until it is ready. With ``learner_version`` (e.g. the learner
        handler's ``policy_version``) the batch's lag is computed and checked.

        Raises:
            BackgroundSamplerError: the background process raised (its
                traceback attached) or died.
            PolicyLagError: the lag exceeds ``max_lag`` (the learner
                published more than once per batch), or the background
                process has waited ``deadlock_seconds`` (5) for weights the
                learner, waiting for this batch, never published.
        """
        if self._closed:
            raise TreeRingError("the background sampler is closed")
        ring = self.ring
        if not self._started:
            self._started = True
            try:
                self._conn.send(("start", self._state_to_load))
            except OSError:  # the process died: begin_read's check handles it
                pass
        if self._holding:
            ring.end_read()
            self._holding = False
        index = self._begin_read()
        self._holding = True
        _, number, completed, state, times = self._receive("batch")
        self._last_state = state
        self.phase_times.merge(times)
        tree = ring.trees[index]
        version = ring.stamp(index)
        return checked_batch(
            tree, completed, version, number, state, learner_version, self.max_lag
        )

    def close(self) -> None:
        """Stop the background process (its cages close, their workers exit) and
        free the trees. Idempotent; also runs at garbage collection and exit."""
        self._closed = True
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:  # None while __init__ fails
            finalizer()

    def __enter__(self) -> BackgroundSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
