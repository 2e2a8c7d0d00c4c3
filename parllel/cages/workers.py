"""Main-process handles of worker processes: start, command, wait, reap."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np

from parllel.cages import worker as protocol
from parllel.cages.layout import usable_cores
from parllel.cages.sync import wait_for
from parllel.errors import (
    EnvAttributeError,
    EnvError,
    StepTimeoutError,
    WorkerDiedError,
)

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
        ctx: Any,
        index: int,
        control: Any,
        env_slice: tuple[int, int],
        env_indices: tuple[int, ...],
        factory_bytes: bytes,
        group_kwargs: dict[str, Any],
        spin_seconds: float,
        want_example: bool,
        cpus: tuple[int, ...] | None = None,
    ) -> None:
        self.index = index
        self.env_slice = env_slice
        self.env_indices = env_indices
        self.row = control.to_ndarray()[index]
        self.row_floats = self.row.view(np.float64)  # the row's float64 fields
        self.row[:] = 0
        self._wait_average = 0.0  # moving average of wait() durations, seconds
        self.command_ready = ctx.Semaphore(0)
        self.work_done = ctx.Semaphore(0)
        self.conn, child_conn = ctx.Pipe()
        # the worker's faulthandler writes its Python stack here on STACK_SIGNAL
        self._stack_reader, stack_writer = ctx.Pipe(duplex=False)
        self._deadline = 0.0
        self._stopped = False
        self.process = ctx.Process(
            target=protocol.worker_main,
            name=f"parllel-worker-{index}",
            args=(
                index,
                child_conn,
                control,
                self.command_ready,
                self.work_done,
                factory_bytes,
                group_kwargs,
                env_slice,
                spin_seconds,
                want_example,
                cpus,
                stack_writer,
            ),
            daemon=True,
        )
        self.process.start()
        child_conn.close()
        stack_writer.close()
        _live_workers[0] += 1
        self._counted = True
        self.auto_spin = spin_seconds < 0

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
        if (
            not protocol.STACK_SIGNAL
            or self._stopped
            or self.process.exitcode is not None
        ):
            return ""
        try:
            os.kill(self.process.pid, protocol.STACK_SIGNAL)
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
    def receive(self, timeout: float = 0.1) -> Any:
        """Receive one pipe message, checking liveness while waiting."""
        while not self.conn.poll(timeout):
            self.check_alive()
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.process.join(1.0)
            raise WorkerLost(self) from None

    def handshake(self, timeout: float) -> tuple[Any, Any]:
        """Wait for the worker's ``ready`` message; return ``(spaces, example)``."""
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
        if isinstance(message, list):  # an error while building the envs
            raise_replies(message)
        _, spaces, example = message
        return spaces, example

    def command(
        self,
        command: int,
        messages: list[tuple],
        ids: np.ndarray,
        layout: int,
        extra: list[int] | None = None,
    ) -> None:
        """Send ``messages`` over the pipe and ``command`` through the control row."""
        row = self.row
        if self.auto_spin:
            row[protocol.SPIN_MICROSECONDS] = auto_spin_seconds() * 1e6
        try:
            for message in messages:
                self.conn.send(message)
        except (BrokenPipeError, ConnectionResetError):
            # the worker is gone; wait() notices its exit and reports it
            self.process.join(1.0)
        row[protocol.N_MESSAGES] = len(messages)
        row[protocol.CMD] = command
        row[protocol.LAYOUT] = layout
        n = len(ids)
        row[protocol.N_IDS] = n
        row[protocol.IDS : protocol.IDS + n] = ids
        if extra is not None:
            row[protocol.IDS + n : protocol.IDS + n + len(extra)] = extra
        self.command_ready.release()

    def wait(self, spin_seconds: float, timeout: float | None = None) -> list[tuple]:
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
        if self.row[protocol.STATUS] == protocol.HAS_MESSAGES:
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
                self.row[protocol.N_MESSAGES] = 0
                self.row[protocol.CMD] = protocol.CLOSE
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


def timeout_error(
    late: list[WorkerHandle], what: str, timeout: float | None
) -> StepTimeoutError:
    """StepTimeoutError naming the ``late`` workers and their envs, with their stacks."""
    stacks = [worker.dump_stack() or "(not available)" for worker in late]
    described = "; ".join(
        f"worker {w.index} (envs {list(w.env_indices)})" for w in late
    )
    parts = [
        f"{described} did not finish a {what} within step_timeout={timeout} s "
        "(an env hangs?); the cage is closed."
    ]
    for worker, stack in zip(late, stacks):
        parts.append(f"--- worker {worker.index}'s Python stack ---\n{stack}")
    return StepTimeoutError(
        "\n".join(parts),
        worker_index=late[0].index,
        env_indices=late[0].env_indices,
        timeout=timeout,
        worker_stack=stacks[0],
    )


def raise_replies(replies: list[tuple]) -> list[Any]:
    """Raise the first ``error`` reply as :class:`EnvError`; return the others."""
    others = []
    for reply in replies:
        if reply[0] == "error":
            _, message, env_index, tb, _pid = reply
            where = f" (env {env_index})" if env_index is not None else ""
            # an env lacking an attribute stays catchable as AttributeError
            missing = message.startswith(EnvAttributeError.__name__ + ":")
            raise (EnvAttributeError if missing else EnvError)(
                f"error in worker process{where}: {message}\n--- worker traceback ---\n{tb}",
                env_index=env_index,
                worker_traceback=tb,
            )
        others.append(reply)
    return others


def default_context() -> Any:
    """forkserver where available (fast starts, safe with threads), else spawn."""
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")
