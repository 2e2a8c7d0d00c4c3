"""Main-process handles of worker processes: start, command, wait, reap.

A :class:`WorkerHandle` owns one worker process
(:mod:`~parllel.cages.process.worker`), its pipe end and its two semaphores,
and speaks the protocol of :mod:`~parllel.cages.process.channel` from the
main process's side.
"""

from __future__ import annotations

import os
import time
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from parllel.arrays import Array
from parllel.arrays.shared_memory import record_semaphores
from parllel.cages.child_processes import usable_cores
from parllel.cages.process.channel import (
    STACK_SIGNAL,
    Command,
    Message,
    Ready,
    Reply,
    Result,
    Row,
    Status,
    WorkerConfig,
    WorkerError,
    wait_for,
)
from parllel.cages.process.worker import worker_main
from parllel.errors import CageError, WorkerDiedError

if TYPE_CHECKING:
    from parllel.cages.child_processes import StartContext

ReplyT = TypeVar("ReplyT", bound=Reply)

_NO_IDS = np.empty(0, np.int64)
# Worker processes alive in this process's cages (all cages together).
_live_workers = [0]
AUTO_SPIN_SECONDS = 0.002
_CORES = usable_cores()  # affinity is fixed for a run; asked once, not per step


def auto_spin_seconds() -> float:
    """Idle-worker polling budget: poll only if every stepping process has a core.

    With more stepping processes (workers of every cage, plus the main
    process) than cores, polling workers would steal the CPU from the process
    doing useful work, so they block instead (docs/cages.md).
    """
    return AUTO_SPIN_SECONDS if _live_workers[0] + 1 <= _CORES else 0.0


class WorkerLost(Exception):
    """Internal: a worker process exited while the main process waited for it."""

    def __init__(self, worker: WorkerHandle) -> None:
        super().__init__(worker.index)
        self.worker = worker


class WorkerTimeout(Exception):
    """Internal: a worker did not finish its command within the cage's timeout."""

    def __init__(self, worker: WorkerHandle) -> None:
        super().__init__(worker.index)
        self.worker = worker


class WorkerHandle:
    """One worker process as seen from the main process.

    Owns the process, its pipe end and its two semaphores; the control row
    is a view of the cage's shared control array.
    """

    def __init__(
        self,
        ctx: StartContext,
        config: WorkerConfig,
        control: Array,
        env_indices: tuple[int, ...],
    ) -> None:
        self.index = index = config.index
        self.env_slice = config.env_slice
        self.env_indices = env_indices
        self.row = control.to_ndarray()[index]
        self.row_floats = self.row.view(np.float64)  # the row's float64 fields
        self.row[:] = 0
        self._wait_average = 0.0  # moving average of wait() durations, seconds
        self.command_ready = ctx.Semaphore(0)
        self.work_done = ctx.Semaphore(0)
        # their names, for a parent to unlink if this process is killed
        self._semaphore_list = record_semaphores([self.command_ready, self.work_done])
        self.conn, child_conn = ctx.Pipe()
        # the worker's faulthandler writes its Python stack here on STACK_SIGNAL
        self._stack_reader, stack_writer = ctx.Pipe(duplex=False)
        self._deadline = 0.0
        self._stopped = False
        self.process = ctx.Process(
            target=worker_main,
            name=f"parllel-worker-{index}",
            args=(
                config,
                child_conn,
                control,
                self.command_ready,
                self.work_done,
                stack_writer,
            ),
            daemon=True,
        )
        self.process.start()
        child_conn.close()
        stack_writer.close()
        _live_workers[0] += 1
        self._counted = True
        self.auto_spin = config.spin_seconds < 0

    # -- liveness ------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise :class:`WorkerLost` if the process has exited."""
        if self.process.exitcode is not None:
            raise WorkerLost(self)

    def _check_in_time(self) -> None:
        """:meth:`check_alive`, and raise :class:`WorkerTimeout` past the deadline."""
        self.check_alive()
        if time.perf_counter() > self._deadline:
            raise WorkerTimeout(self)

    def dump_stack(self, timeout: float = 2.0) -> str:
        """The worker's Python stack (every thread), as its faulthandler prints it.

        Works while the worker is stuck anywhere, even in C code holding the
        GIL; returns "" if the worker is gone or does not answer in time.
        """
        pid = self.process.pid
        if not STACK_SIGNAL or self._stopped or self.process.exitcode is not None:
            return ""
        if pid is None:  # never started
            return ""
        try:
            os.kill(pid, STACK_SIGNAL)
        except ProcessLookupError:
            return ""
        reader, chunks = self._stack_reader, []
        wait = timeout  # for the dump to start, then for the rest of it
        while reader.poll(wait):
            chunk = os.read(reader.fileno(), 1 << 16)
            if not chunk:  # the worker closed its end (it exited)
                break
            chunks.append(chunk)
            wait = 0.2
        return b"".join(chunks).decode(errors="replace")

    def died_error(self, starting: bool = False) -> WorkerDiedError:
        """The user-facing error for this worker's death.

        ``starting``: it died before it was ready (restarting would not help).
        """
        code = self.process.exitcode
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else (f"exited with code {code}")
        )
        if starting:
            advice = (
                "before it was ready (while starting or building its envs); its "
                "error output (stderr) says why"
            )
        else:
            advice = (
                "; its envs are lost. Pass on_worker_death='restart' to the cage "
                "to recreate them instead"
            )
        return WorkerDiedError(
            f"worker {self.index} (envs {list(self.env_indices)}) {how}"
            + (" " if starting else "")
            + advice,
            worker_index=self.index,
            env_indices=self.env_indices,
            exitcode=code,
        )

    # -- messages --------------------------------------------------------------
    def receive(self, timeout: float = 0.1) -> list[Reply]:
        """Receive the worker's replies, checking liveness while waiting."""
        while not self.conn.poll(timeout):
            self.check_alive()
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.process.join(1.0)
            raise WorkerLost(self) from None

    def handshake(self, timeout: float) -> tuple[Any, dict[str, Any] | None]:
        """Wait for the worker's :class:`Ready`; return ``(spaces, example)``."""
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.1):
            self.check_alive()
            if time.monotonic() > deadline:
                raise WorkerDiedError(
                    f"worker {self.index} (envs {list(self.env_indices)}) did not "
                    f"build its envs within start_timeout={timeout} s. Its Python "
                    f"stack:\n{self.dump_stack() or '(not available)'}",
                    self.index,
                    self.env_indices,
                    None,
                )
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(5.0)
            raise WorkerLost(self) from None
        if isinstance(message, WorkerError):  # an error while building the envs
            raise message.exception()
        assert isinstance(message, Ready), message
        return message.spaces, message.example

    def command(
        self,
        command: int,
        messages: list[Message],
        ids: np.ndarray,
        layout: int,
        extra: list[int] | None = None,
    ) -> None:
        """Send ``command`` through the control row and ``messages`` over the pipe.

        ``ids``: the view ids of the slot tree of layout ``layout``;
        ``extra``: words written after them (a RESET's env indices).

        The messages are pickled first (one that does not pickle raises here,
        before the worker is told anything) and sent after the command is
        released: the worker reads them only once woken, so a message larger
        than the pipe's buffer would block both sides if sent before.
        """
        row = self.row
        if self.auto_spin:
            row[Row.SPIN_MICROSECONDS] = auto_spin_seconds() * 1e6
        payloads = [ForkingPickler.dumps(message) for message in messages]
        row[Row.N_MESSAGES] = len(messages)
        row[Row.COMMAND] = command
        row[Row.LAYOUT] = layout
        n = len(ids)
        row[Row.N_IDS] = n
        start = Row.IDS
        row[start : start + n] = ids
        if extra is not None:
            row[start + n : start + n + len(extra)] = extra
        self.command_ready.release()
        try:
            for payload in payloads:
                self.conn.send_bytes(payload)
        except (BrokenPipeError, ConnectionResetError):
            # the worker is gone; wait() notices its exit and reports it
            self.process.join(1.0)

    def request(self, message: Message, spin_seconds: float) -> Any:
        """Send one request to this idle worker and return its result.

        Raises:
            EnvError: the request raised in the worker.
            WorkerDiedError: the worker died meanwhile.
        """
        self.command(Command.MESSAGES, [message], _NO_IDS, 0)
        try:
            replies = raise_replies(self.wait(spin_seconds))
        except WorkerLost:
            raise self.died_error() from None
        reply = replies[0] if replies else None
        if not isinstance(reply, Result):  # the worker answers a request with one
            raise CageError(
                f"worker {self.index} answered a {type(message).__name__} request "
                f"with {replies!r} instead of one Result"
            )
        return reply.value

    def wait(self, spin_seconds: float, timeout: float | None = None) -> list[Reply]:
        """Wait until the worker finished its command; return its replies.

        The main process polls (yielding the CPU) only while a short wait is
        expected: up to twice the recent average wait, capped at
        ``spin_seconds``. Long waits (the worker has much more to do) block
        at once, so the main process never burns a core the workers need.
        ``timeout`` is checked only while blocked (every 0.1 s), never on the
        fast path; past it :class:`WorkerTimeout` is raised.
        """
        expected = self._wait_average
        budget = min(spin_seconds, 2.0 * expected) if expected < spin_seconds else 0.0
        start = time.perf_counter()
        if timeout is None:
            wait_for(self.work_done, budget, self.check_alive)
        else:
            self._deadline = start + timeout
            wait_for(self.work_done, budget, self._check_in_time)
        waited = time.perf_counter() - start
        self._wait_average += 0.1 * (waited - expected)
        if self.row[Row.STATUS] == Status.HAS_REPLIES:
            return self.receive()
        return []

    # -- shutdown --------------------------------------------------------------
    def stop(self, timeout: float = 2.0) -> None:
        """Ask the worker to exit; terminate, then kill, if it does not (idempotent).

        ``timeout``: seconds to wait for a clean exit (0 for a worker known
        to be stuck).
        """
        if self._stopped:
            return
        self._stopped = True
        if self._counted:
            _live_workers[0] -= 1
            self._counted = False
        process = self.process
        if process.exitcode is None:
            try:
                self.row[Row.N_MESSAGES] = 0
                self.row[Row.COMMAND] = Command.CLOSE
                self.command_ready.release()
            except Exception:
                pass
            process.join(timeout)
        if process.exitcode is None:
            process.terminate()
            process.join(1.0)
        if process.exitcode is None:
            process.kill()
            process.join(1.0)
        for conn in (self.conn, self._stack_reader):
            try:
                conn.close()
            except OSError:
                pass
        try:
            process.close()
        except ValueError:
            pass
        if self._semaphore_list is not None:
            self._semaphore_list.close()


def raise_replies(replies: list[ReplyT]) -> list[ReplyT]:
    """Raise the first :class:`WorkerError` reply (as EnvError); return the others."""
    for reply in replies:
        if isinstance(reply, WorkerError):  # runs only while there are replies
            raise reply.exception()
    return replies
