"""BackgroundSampler: a sampler in its own process, filling a TreeRing while the learner trains.

The user's builder function runs in the background process and returns a
sampler (cages, their workers and the handler are created there). That
process sends the layout of the sampler's tree; the learner allocates K
shared trees of that layout (it owns every segment, so nothing outlives it
even if the background process is killed) and sends them back; then the
background process fills them in turn (:meth:`BatchSampler.use_tree
<parllel.samplers.base.BatchSampler.use_tree>` carries the batch boundary
from one tree to the next) and the learner reads them without a copy.

If the sampler's handler follows shared weights (it has ``refresh_weights``
and ``policy_version``, like a TorchHandler after ``follow_weights``),
batch ``n`` is collected with policy version ``>= n - max_lag``: the
background process waits for that version before it starts the batch.
This assumes the learner publishes once per batch it trains on.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing import util
from typing import Any, NamedTuple

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
        batch_index: the batch's number, from 0.
        lag: ``learner_version - policy_version`` if ``collect_batch`` was
            given the learner's version, else None.
    """

    sample_tree: ArrayDict
    completed: list[TrajInfo]
    policy_version: int
    batch_index: int
    lag: int | None


class _ParentGone(Exception):
    pass


def _follows_weights(handler: Any) -> bool:
    return (
        callable(getattr(handler, "refresh_weights", None))
        and getattr(handler, "policy_version", None) is not None
    )


def _run(
    build: Callable[..., Any],
    args: tuple,
    conn: Any,
    handover: Handover,
    max_lag: int | None,
) -> None:
    """The background process: build the sampler, then fill the ring's trees."""
    # the learner decides what Ctrl-C does (e.g. a runner finishes its
    # iteration first); a terminal sends SIGINT to this process too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = mp.parent_process()
    sampler = ring = None
    try:
        sampler = build(*args)
        original = sampler.sample_tree
        conn.send(("layout", tree_layout(original)))
        ring = TreeRing(conn.recv(), handover=handover)
        sampler.use_tree(ring.trees[0])  # (and later the others)
        original.close()  # the ring's trees replace it for good

        def check_alive() -> None:
            if ring.closed:
                raise TreeRingClosedError("the learner closed the background sampler")
            if parent is not None and not parent.is_alive():
                raise _ParentGone

        follows = _follows_weights(sampler.handler)
        n = 0
        while True:
            index = ring.begin_write(check_alive=check_alive)
            assert index is not None  # a blocking call
            version = 0
            if follows:
                least = 0 if max_lag is None else max(n - max_lag, 0)
                version = sampler.handler.refresh_weights(least, check_alive)
            sampler.use_tree(ring.trees[index])
            _, completed = sampler.collect_batch()
            conn.send(("batch", n, completed))  # before the hand-over: the
            ring.end_write(stamp=version)  # learner reads it after begin_read
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
        max_lag: batch ``n`` is collected with policy version ``>= n -
            max_lag`` (if the handler follows shared weights); 0 reproduces
            synchronous sampling, None never waits.
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
        trees: list[ArrayDict] = []
        try:
            self._process.start()
            child_conn.close()
            layout = self._receive("layout")[1]
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
            self._messages.append(message)
        if not self._process.is_alive():
            code = self._process.exitcode
            self.close()
            raise BackgroundSamplerDiedError(
                f"the background sampler process exited (exit code {code})", code
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
                published more than once per batch).
        """
        if self._closed:
            raise TreeRingClosedError("the background sampler is closed")
        ring = self.ring
        if self._holding:
            ring.end_read()
            self._holding = False
        index = ring.begin_read(check_alive=self._check_alive)
        assert index is not None
        self._holding = True
        _, number, completed = self._receive("batch")
        version = ring.stamp(index)
        lag = None if learner_version is None else int(learner_version) - version
        if lag is not None and self.max_lag is not None and lag > self.max_lag:
            raise PolicyLagError(
                f"batch {number} was collected with policy version {version}, "
                f"{lag} behind the learner's {learner_version} (max_lag="
                f"{self.max_lag}); publish weights once per batch"
            )
        return BackgroundBatch(ring.trees[index], completed, version, number, lag)

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
