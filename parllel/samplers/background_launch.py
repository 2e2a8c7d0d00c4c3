"""Starting, hearing and stopping the process of a background sampler.

The learner side of :class:`~parllel.samplers.BackgroundSampler` starts the
process here (its builder and arguments travel by pickle), waits for the
``layout`` message the process sends once it built its sampler, and shuts
it down; the process side is :mod:`parllel.samplers.background_process`.
"""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from collections import deque
from typing import Any

from parllel import fields
from parllel.cages.child_processes import start_context
from parllel.errors import (
    BackgroundSamplerError,
    ConfigError,
    ParllelWarning,
    PolicyLagError,
)
from parllel.samplers.background_process import run_background_sampler
from parllel.samplers.tree_ring import Handover, TreeRing
from parllel.tree import ArrayDict

__all__ = [
    "ProcessDied",
    "ProcessReports",
    "await_layout",
    "deadlock_error",
    "died_error",
    "reported_error",
    "shutdown",
    "start_process",
    "warn_restart",
    "warn_unrecorded_versions",
]


class ProcessDied(Exception):
    """The background process exited before sending its tree layout."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(exitcode)
        self.exitcode = exitcode


def shutdown(process: Any, ring: TreeRing | None, conn: Any, timeout: float) -> None:
    """Close the ring and the pipe (the background process then exits), join.

    The pipe is closed first: a background process blocked sending a batch
    message larger than the pipe's buffer (the learner reads it only while
    waiting for a batch) fails at once instead of waiting to be terminated.
    """
    if ring is not None:
        ring.close()
    conn.close()
    if process.pid is not None:
        process.join(timeout)
        if process.is_alive():  # stuck in a batch: its cage workers exit with it
            process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)


def torch_threads() -> int | None:
    """This process's torch thread count, or None where torch is not loaded.

    The background process uses the same count: started by forkserver or
    spawn, its torch would otherwise take every core, and its idle threads
    spin after each parallel region on the core the learner trains on (a
    script's ``torch.set_num_threads(1)`` is not inherited).
    """
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def start_process(
    start_method: str | None,
    build: tuple[Any, tuple],
    handover: Handover,
    max_lag: int | None,
    resume: tuple[int, int | None] | None,
) -> tuple[Any, Any]:
    """Start a background process that builds ``build[0](*build[1])``;
    return the process and the learner's end of its pipe.

    Raises:
        ConfigError: the builder or its arguments cannot be pickled.
    """
    ctx = start_context(start_method)
    conn, child_conn = ctx.Pipe()
    function, args = build
    process = ctx.Process(
        target=run_background_sampler,
        args=(function, args, child_conn, handover, max_lag, resume, torch_threads()),
        name="parllel-background-sampler",
    )
    try:
        process.start()
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        if "pickle" not in str(error).lower():
            raise
        raise ConfigError(
            f"the background sampler's builder and its arguments travel to "
            f"its process by pickle, and they cannot: {error}. Use a "
            "module-level function (not a lambda or a nested function) and "
            "picklable arguments"
        ) from error
    finally:
        child_conn.close()
    return process, conn


def await_layout(process: Any, conn: Any, close_timeout: float) -> tuple:
    """The first message of a started process: ``layout`` or ``error``.

    Raises:
        ProcessDied: the process exited before sending it.
    """
    while not conn.poll(0.1):
        if not process.is_alive() and not conn.poll():
            raise ProcessDied(process.exitcode)
    try:
        return conn.recv()
    except EOFError:
        process.join(close_timeout)
        raise ProcessDied(process.exitcode) from None


def reported_error(message: tuple) -> BackgroundSamplerError:
    """The error for an ``("error", repr, traceback)`` message of the process."""
    return BackgroundSamplerError(
        f"the background sampler raised {message[1]}\n"
        f"--- its traceback ---\n{message[2]}",
        worker_traceback=message[2],
    )


class ProcessReports:
    """What the background process reported, besides an error.

    Attributes:
        batches: its ``batch`` messages not yet taken, in order.
        waits: ``(version, since when)`` while it waits for weights, else None.
        first_version: its base policy version (batch ``n`` needs ``>= base
            + n - max_lag``), once it started sampling.
        begun: the batch it began last (-1: none since it started).
    """

    def __init__(self) -> None:
        self.batches: deque[tuple] = deque()
        self.waits: tuple[int, float] | None = None
        self.first_version: int | None = None
        self.begun = -1

    def read(self, conn: Any) -> tuple | None:
        """Take in what the process sent; return its error report if one came
        (what follows it stays unread), else None."""
        while conn.poll():
            try:
                message = conn.recv()
            except EOFError:
                break
            kind = message[0]
            if kind == "error":
                return message
            if kind == "waiting":
                self.waits = (message[1], time.monotonic())
            elif kind == "resumed":
                self.waits = None
            elif kind == "started":
                self.first_version = message[1]
            elif kind == "begin":
                self.begun = message[1]
            else:
                self.batches.append(message)
        return None

    def forget_unfinished(self, written: int) -> int:
        """Forget a dead process's batches beyond the ``written`` it handed
        over; return 1 if it had begun batch ``written`` (dropped), else 0."""
        self.batches = deque(m for m in self.batches if m[1] < written)
        dropped = int(self.begun >= written)
        self.begun = -1
        return dropped


def died_error(
    exitcode: int | None, restarts: int | None, max_restarts: int
) -> BackgroundSamplerError:
    """The error for a process that exited: before building its sampler
    (``restarts`` None), or with ``max_restarts`` used up."""
    if restarts is None:
        return BackgroundSamplerError(
            f"the background sampler process exited (exit code {exitcode}) "
            "before building its sampler",
            exitcode=exitcode,
        )
    after = f" after {restarts} restart{'s' * (restarts > 1)}" if restarts else ""
    hint = "" if max_restarts else "; max_restarts=N replaces it N times"
    return BackgroundSamplerError(
        f"the background sampler process exited (exit code {exitcode})"
        f"{after} (max_restarts={max_restarts}){hint}",
        exitcode=exitcode,
    )


def warn_restart(
    exitcode: int | None, restarts: int, max_restarts: int, dropped: int
) -> None:
    """Warn that a new process replaces one that exited (at the learner's
    ``collect_batch`` caller)."""
    warnings.warn(
        f"the background sampler process exited (exit code {exitcode}); "
        f"restart {restarts} of {max_restarts}"
        + (", its unfinished batch dropped" if dropped else "")
        + "; the new process's envs start from reset",
        ParllelWarning,
        stacklevel=5,
    )


def warn_unrecorded_versions(layout: ArrayDict, follows_weights: bool) -> None:
    """Warn (at the sampler's constructor caller) when a handler follows
    weights but the tree does not record each step's policy version."""
    agent_info = layout[fields.AGENT_INFO] if fields.AGENT_INFO in layout else {}
    if follows_weights and fields.POLICY_VERSION not in agent_info:
        warnings.warn(
            "the background sampler's handler follows shared weights but "
            "its sample tree has no agent_info.policy_version: build the "
            "tree after handler.follow_weights(...) to record each step's "
            "version (lag_min and lag_mean then equal lag)",
            ParllelWarning,
            stacklevel=3,
        )


def deadlock_error(version: int, max_lag: int | None) -> PolicyLagError:
    """The error for a process waiting for weights the learner, waiting for
    a batch, has not published."""
    return PolicyLagError(
        f"deadlock: the background sampler waits for policy version "
        f"{version} (max_lag={max_lag}) while the learner waits "
        "for a batch; publish the weights once per collected batch "
        "(handler.publish_weights(), or the runner's publisher=)"
    )
