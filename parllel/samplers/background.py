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
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing import util
from typing import Any, NamedTuple

from parllel import fields
from parllel.cages import TrajInfo
from parllel.cages.sync import start_context
from parllel.errors import (
    BackgroundSamplerDiedError,
    BackgroundSamplerError,
    ConfigError,
    PolicyLagError,
    TreeRingClosedError,
)
from parllel.samplers.tree_ring import Handover, TreeRing, allocate_like, tree_layout
from parllel.tree import ArrayDict


class BackgroundBatch(NamedTuple):
    """One batch from :meth:`BackgroundSampler.collect_batch`.

    Attributes:
        sample_tree: the filled tree (shared memory, no copy), valid until
            the next ``collect_batch``.
        completed: the episodes that finished in this batch.
        policy_version: version of the weights that collected it (0 if the
            handler follows no shared weights).
            With weights refreshed every step, the version at the batch's
            start (its oldest); ``agent_info.policy_version`` in the tree
            holds each step's.
        batch_index: the batch's number, from 0.
        lag: ``learner_version - policy_version`` (the batch's largest lag)
            if ``collect_batch`` was given the learner's version, else None.
        lag_min, lag_mean: the smallest and mean lag over the batch's steps
            (from ``agent_info.policy_version`` if the tree records it, else
            equal to ``lag``), or None without the learner's version.
        sampler_state: the background sampler's transform and observation
            normalizer state after this batch (see
            :meth:`BackgroundSampler.state_dict`).
    """

    sample_tree: ArrayDict
    completed: list[TrajInfo]
    policy_version: int
    batch_index: int
    lag: int | None
    lag_min: int | None = None
    lag_mean: float | None = None
    sampler_state: dict[str, Any] | None = None


class _ParentGone(Exception):
    pass


def _follows_weights(handler: Any) -> bool:
    return (
        callable(getattr(handler, "refresh_weights", None))
        and getattr(handler, "policy_version", None) is not None
    )


def _stateful_parts(sampler: Any) -> dict[str, Any]:
    """The sampler's parts with state: its transform and observation normalizer."""
    parts = {
        "transform": getattr(sampler, "transform", None),
        "observation_normalizer": getattr(sampler, "observation_normalizer", None),
    }
    return {
        name: part
        for name, part in parts.items()
        if callable(getattr(part, "state_dict", None))
    }


def sampler_state(sampler: Any) -> dict[str, Any]:
    """``state_dict()`` of the sampler's transform and observation normalizer."""
    return {name: part.state_dict() for name, part in _stateful_parts(sampler).items()}


def load_sampler_state(sampler: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`sampler_state` returned into the sampler's parts."""
    parts = _stateful_parts(sampler)
    unknown = sorted(set(state) - set(parts))
    if unknown:
        raise ConfigError(
            f"the background sampler has no {unknown} to load state into "
            f"(it has {sorted(parts)})"
        )
    for name, part_state in state.items():
        parts[name].load_state_dict(part_state)


def _wait_for_weights(
    handler: Any, least: int, conn: Any, check_alive: Callable[[], None]
) -> int:
    """Refresh the handler's weights to version ``>= least``; tell the learner
    while waiting for it (so a learner that never publishes is told so)."""
    waiting: list[int] = []

    def check() -> None:
        check_alive()
        if not waiting:  # runs only when the version is not there yet
            conn.send(("waiting", least))
            waiting.append(least)

    version = handler.refresh_weights(max(least, 0), check)
    if waiting:
        conn.send(("resumed", version))
    return version


def _run(
    build: Callable[..., Any],
    args: tuple,
    conn: Any,
    handover: Handover,
    max_lag: int | None,
) -> None:
    """The background process: build the sampler, then fill the ring's trees."""
    # Ctrl-C in a terminal reaches the whole process group: the learner
    # decides when this process stops (it closes the ring).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = mp.parent_process()
    sampler = ring = None
    try:
        sampler = build(*args)
        original = sampler.sample_tree
        conn.send(("layout", tree_layout(original), sampler_state(sampler)))
        ring = TreeRing(conn.recv(), handover=handover)
        sampler.use_tree(ring.trees[0])  # (and later the others)
        original.close()  # the ring's trees replace it for good

        def check_alive() -> None:
            if ring.closed:
                raise TreeRingClosedError("the learner closed the background sampler")
            if parent is not None and not parent.is_alive():
                raise _ParentGone

        while not conn.poll(0.1):  # sampling starts at the first collect_batch
            check_alive()
        start = conn.recv()
        assert start[0] == "start", start
        if start[1] is not None:
            load_sampler_state(sampler, start[1])
        follows = _follows_weights(sampler.handler)
        first_version = (
            sampler.handler.refresh_weights(0, check_alive) if follows else 0
        )
        n = 0
        while True:
            index = ring.begin_write(check_alive=check_alive)
            assert index is not None  # a blocking call
            version = 0
            if follows:
                least = 0 if max_lag is None else first_version + n - max_lag
                version = _wait_for_weights(sampler.handler, least, conn, check_alive)
            sampler.use_tree(ring.trees[index])
            _, completed = sampler.collect_batch()
            # sent before the hand-over: the learner reads it after begin_read
            conn.send(("batch", n, completed, sampler_state(sampler)))
            ring.end_write(stamp=version)
            n += 1
    except (TreeRingClosedError, _ParentGone, BrokenPipeError):
        pass  # the learner closed (or is gone): a normal end
    except BaseException as exc:
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        except Exception:
            pass
    finally:
        if sampler is not None:
            for cage in sampler.cages:
                cage.close()


def _shutdown(process: Any, ring: TreeRing | None, conn: Any, timeout: float) -> None:
    """Close the ring (the background process then exits), join, free the memory."""
    if ring is not None:
        ring.close()
    if process.pid is not None:
        process.join(timeout)
        if process.is_alive():  # stuck in a batch: its cage workers exit with it
            process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
    conn.close()


def _lags(tree: ArrayDict, learner_version: int, stamp: int) -> tuple[int, int, float]:
    """Largest, smallest and mean lag of a batch's steps behind ``learner_version``.

    The largest is the batch stamp's (the version at its start): a handler
    that refreshes between steps only moves to newer versions.
    """
    lag = learner_version - stamp
    agent_info = tree[fields.AGENT_INFO] if fields.AGENT_INFO in tree else None
    if agent_info is None or fields.POLICY_VERSION not in agent_info:
        return lag, lag, float(lag)
    lags = learner_version - agent_info[fields.POLICY_VERSION].to_ndarray()
    return lag, int(lags.min()), float(lags.mean())


class BackgroundSampler:
    """Runs a sampler in its own process over K >= 2 preallocated trees.

    Args:
        build_sampler: a picklable function (module level) that builds and
            returns the sampler (e.g. a :class:`FeedForwardSampler` with its
            cages and handler) in the background process.
        *args: its arguments (picklable; may include shared weights, which
            travel at process start).
        k: number of trees (>= 2): the learner holds one, the sampler fills
            up to ``k - 1`` ahead.
        max_lag: batch ``n`` is collected with policy version ``>= v0 + n
            - max_lag``, ``v0`` being the newest version when sampling starts
            (if the handler follows shared weights); 0 reproduces synchronous
            sampling, None never waits.
        start_method: start method of the background process.
        close_timeout: seconds :meth:`close` waits for the process to exit
            before terminating it.

    Example:
        >>> with BackgroundSampler(build_sampler, weights, max_lag=1) as sampler:
        ...     batch = sampler.collect_batch(learner_version=handler.policy_version)
        ...     train(batch.sample_tree); handler.publish_weights()
    """

    def __init__(
        self,
        build_sampler: Callable[..., Any],
        *args: Any,
        k: int = 2,
        max_lag: int | None = 0,
        start_method: str | None = None,
        close_timeout: float = 30.0,
    ) -> None:
        if max_lag is not None and int(max_lag) < 0:
            raise ConfigError(f"max_lag must be >= 0 or None, got {max_lag}")
        self.max_lag = None if max_lag is None else int(max_lag)
        handover = Handover(k, start_method)
        ctx = start_context(start_method)
        self._conn, child_conn = ctx.Pipe()
        self._process = ctx.Process(
            target=_run,
            args=(build_sampler, args, child_conn, handover, self.max_lag),
            name="parllel-background-sampler",
        )
        self._ring: TreeRing | None = None
        self._messages: deque = deque()
        self._holding = False
        self._closed = False
        self._started = False
        self._state_to_load: dict[str, Any] | None = None
        self._last_state: dict[str, Any] | None = None
        self._initial_state: dict[str, Any] = {}
        # (version, since when) the background process waits for weights
        self._sampler_waits: tuple[int, float] | None = None
        self.deadlock_seconds = 5.0
        trees: list[ArrayDict] = []
        try:
            self._process.start()
            child_conn.close()
            _, layout, self._initial_state = self._receive("layout")
            for _ in range(handover.k):
                trees.append(allocate_like(layout))
            self._ring = TreeRing(trees, handover=handover)
            self._conn.send(trees)
        except BaseException:
            for tree in trees:
                tree.close()
            handover.close()
            self._closed = True
            _shutdown(self._process, None, self._conn, close_timeout)
            raise
        self._finalizer = util.Finalize(
            self,
            _shutdown,
            args=(self._process, self._ring, self._conn, close_timeout),
            exitpriority=10,  # before multiprocessing joins its children at exit
        )

    @property
    def pid(self) -> int | None:
        """Process id of the background process."""
        return self._process.pid

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

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the background sampler's transform and observation
        normalizer before sampling starts (when resuming a run).

        Raises:
            ConfigError: sampling already started (call it before the first
                :meth:`collect_batch`).
        """
        if self._started:
            raise ConfigError(
                "load_state_dict must come before the first collect_batch: "
                "the background sampler has started sampling"
            )
        self._state_to_load = dict(state)
        self._last_state = None

    def reset(self) -> None:
        """Nothing to do before sampling starts (the background sampler resets
        its envs then; runners call this when resuming).

        Raises:
            ConfigError: sampling already started.
        """
        if self._started:
            raise ConfigError(
                "a background sampler cannot reset once sampling started; "
                "restore a checkpoint before the first collect_batch"
            )

    @property
    def ring(self) -> TreeRing:
        """The trees the background process fills."""
        assert self._ring is not None
        return self._ring

    def _check_alive(self) -> None:
        """Raise if the background process reported an error or is gone."""
        while self._conn.poll():
            try:
                message = self._conn.recv()
            except EOFError:
                break
            if message[0] == "error":
                self.close()
                raise BackgroundSamplerError(
                    f"the background sampler raised {message[1]}\n"
                    f"--- its traceback ---\n{message[2]}",
                    worker_traceback=message[2],
                )
            if message[0] == "waiting":
                self._sampler_waits = (message[1], time.monotonic())
            elif message[0] == "resumed":
                self._sampler_waits = None
            else:
                self._messages.append(message)
        if not self._process.is_alive():
            code = self._process.exitcode
            self.close()
            raise BackgroundSamplerDiedError(
                f"the background sampler process exited (exit code {code})", code
            )

    def _check_deadlock(self) -> None:
        """While the learner waits for a batch: raise if the background
        process has been waiting for weights the learner has not published."""
        self._check_alive()
        waits = self._sampler_waits
        if waits is not None and time.monotonic() - waits[1] > self.deadlock_seconds:
            self.close()
            raise PolicyLagError(
                f"deadlock: the background sampler waits for policy version "
                f"{waits[0]} (max_lag={self.max_lag}) while the learner waits "
                "for a batch; publish the weights once per collected batch "
                "(handler.publish_weights(), or the runner's publisher=)"
            )

    def _receive(self, kind: str) -> tuple:
        while not self._messages:
            if self._conn.poll(0.1):
                self._check_alive()
            elif not self._process.is_alive():
                self._check_alive()
        message = self._messages.popleft()
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
            raise TreeRingClosedError("the background sampler is closed")
        ring = self.ring
        if not self._started:
            self._conn.send(("start", self._state_to_load))
            self._started = True
        if self._holding:
            ring.end_read()
            self._holding = False
        index = ring.begin_read(check_alive=self._check_deadlock)
        assert index is not None
        self._holding = True
        _, number, completed, state = self._receive("batch")
        self._last_state = state
        tree = ring.trees[index]
        version = ring.stamp(index)
        if learner_version is None:
            return BackgroundBatch(
                tree, completed, version, number, None, None, None, state
            )
        lag, lag_min, lag_mean = _lags(tree, int(learner_version), version)
        if self.max_lag is not None and lag > self.max_lag:
            raise PolicyLagError(
                f"batch {number} was collected with policy version {version}, "
                f"{lag} behind the learner's {learner_version} (max_lag="
                f"{self.max_lag}); publish weights once per batch"
            )
        return BackgroundBatch(
            tree, completed, version, number, lag, lag_min, lag_mean, state
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
