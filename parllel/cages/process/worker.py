"""The worker process: a plain function with a command loop.

It builds its envs from the cloudpickled factory, answers :class:`Ready`,
then serves commands written into its control row
(:mod:`parllel.cages.process.channel`): it reads the pipe messages announced in the
row, steps or resets its envs straight into the shared-memory slots, and
reports through the row's status, sending replies over the pipe only when
there are any.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from multiprocessing.synchronize import Semaphore

import cloudpickle
import numpy as np

from parllel.arrays import Array
from parllel.cages.child_processes import ParentGone, parent_check
from parllel.cages.env_group import EnvGroup
from parllel.cages.env_info import KeptInfos
from parllel.cages.process.channel import (
    STACK_SIGNAL,
    Command,
    Episodes,
    GiveEnvs,
    Infos,
    Layout,
    Message,
    Ready,
    Reply,
    Request,
    ResetArgs,
    Result,
    Row,
    Status,
    TakeEnvs,
    Views,
    WorkerConfig,
    WorkerError,
    read_reset_indices,
    record_episodes,
    wait_for,
)
from parllel.cages.process.slots import WorkerSlots
from parllel.errors import EnvAttributeError, EnvError


def worker_main(
    config: WorkerConfig,
    conn: Connection,
    control: Array,
    command_ready: Semaphore,
    work_done: Semaphore,
    stack_conn: Connection | None = None,
) -> None:
    """Entry point of a worker process (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    # a worker forked while a runner handles SIGTERM must still die of it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if stack_conn is not None and STACK_SIGNAL:
        # dumps every thread's stack even when stuck in C code holding the GIL
        faulthandler.register(STACK_SIGNAL, file=stack_conn.fileno(), all_threads=True)
    if config.cpus:
        os.sched_setaffinity(0, config.cpus)  # checked by the cage
    check_parent = parent_check()
    group = None
    try:
        env_factory, env_kwargs, sources = cloudpickle.loads(config.factory_bytes)
        sources.install(env_factory, env_kwargs)  # tracebacks show the user's lines
        group = EnvGroup(env_factory, env_kwargs, **config.group_kwargs)
        example = group.example_step() if config.want_example else None
        conn.send(Ready(group.spaces, example))
    except BaseException as exc:
        _send_error(conn, exc)
        if group is not None:
            group.close()
        return
    try:
        _serve(config, conn, control, command_ready, work_done, group, check_parent)
    except (ParentGone, EOFError, BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        group.close()
        conn.close()


def _serve(
    config: WorkerConfig,
    conn: Connection,
    control: Array,
    command_ready: Semaphore,
    work_done: Semaphore,
    group: EnvGroup,
    check_parent: Callable[[], None],
) -> None:
    """The command loop (returns on ``Command.CLOSE``)."""
    row = control.to_ndarray()[config.index]
    seconds = row.view(np.float64)
    bounds = list(config.env_slice)  # this worker's [lo, hi) (moves when balancing)
    slots = WorkerSlots()
    trees = slots.trees
    clock = time.perf_counter
    spin_seconds = config.spin_seconds
    # plain ints in locals: the per-step reads and writes below
    command_at, n_messages_at, layout_at = Row.COMMAND, Row.N_MESSAGES, Row.LAYOUT
    n_ids_at, ids_at, status_at = Row.N_IDS, Row.IDS, Row.STATUS
    n_episodes_at, spin_at, seconds_at = (
        Row.N_EPISODES, Row.SPIN_MICROSECONDS, Row.STEP_SECONDS,
    )  # fmt: skip
    step, reset, close = Command.STEP, Command.RESET, Command.CLOSE
    ok, has_replies = Status.OK, Status.HAS_REPLIES
    while True:
        spin = row[spin_at] * 1e-6 if spin_seconds < 0 else spin_seconds
        wait_for(command_ready, spin, check_parent, poll_seconds=0.5)
        command = int(row[command_at])
        row[status_at] = ok
        row[n_episodes_at] = 0
        replies: list[Reply] = []
        try:
            for _ in range(int(row[n_messages_at])):
                reply = _handle(conn.recv(), group, slots, bounds)
                if reply is not None:
                    replies.append(reply)
            if command == step or command == reset:
                n_ids = int(row[n_ids_at])
                key = (int(row[layout_at]), *row[ids_at : ids_at + n_ids])
                tree = trees.get(key)
                if tree is None:
                    tree = slots.tree(key)
                if command == step:
                    start = clock()
                    completed = group.step(tree["action"], tree["out"], bounds[0])
                    seconds[seconds_at] = clock() - start
                    if completed and not record_episodes(row, completed):
                        replies.append(Episodes(completed))
                else:
                    indices = read_reset_indices(row, n_ids)
                    args, slots.reset_args = slots.reset_args, None
                    if args is None:
                        group.reset(tree["observation"], indices, bounds[0])
                    else:
                        group.reset(
                            tree["observation"], indices, bounds[0],
                            args.seeds, args.options,
                        )  # fmt: skip
                if group.keep_infos and (group.step_infos or group.reset_infos):
                    replies.append(
                        Infos(KeptInfos(group.step_infos, group.reset_infos))
                    )
            elif command == close:
                return
        except ParentGone:
            raise
        except BaseException as exc:
            replies.append(error_reply(exc))
        if not replies:
            work_done.release()
        else:
            # pickled (an unpicklable reply becomes an error reply), announced,
            # then sent: the main process reads the pipe only after work_done,
            # so a reply larger than the pipe's buffer must not come first
            payload = _pickled_replies(replies)
            row[status_at] = has_replies
            work_done.release()
            conn.send_bytes(payload)


def _handle(
    message: Message, group: EnvGroup, slots: WorkerSlots, bounds: list[int]
) -> Result | None:
    """Learn a slot message, or run a request and return its result."""
    if isinstance(message, (Layout, Views, ResetArgs)):
        slots.learn(message)
        return None
    if not isinstance(message, Request):
        raise ValueError(f"unknown worker message {message!r}")
    result = message.run(group)
    if isinstance(message, (GiveEnvs, TakeEnvs)):  # envs leave or join this range
        bounds[:] = message.moved_range(*bounds)
    return Result(result)


def error_reply(exc: BaseException) -> WorkerError:
    """The reply reporting ``exc`` (call inside its ``except`` block).

    It carries the env's own exception (``exc``'s cause, for an
    :class:`~parllel.errors.EnvError`) when that survives pickling; the
    message says so when it does not.
    """
    env_index = getattr(exc, "env_index", None)
    tb = getattr(exc, "worker_traceback", "") or traceback.format_exc()
    original = exc.__cause__ if isinstance(exc, EnvError) else exc
    cause, note = _portable(original)
    return WorkerError(
        f"{type(exc).__name__}: {exc}{note}",
        env_index,
        tb,
        os.getpid(),
        missing_attribute=isinstance(exc, EnvAttributeError),
        cause=cause,
    )


def _portable(exc: BaseException | None) -> tuple[BaseException | None, str]:
    """``exc`` if it survives a pickle round trip, else None and a note saying why."""
    if exc is None:
        return None, ""
    try:
        ForkingPickler.loads(ForkingPickler.dumps(exc))
    except Exception as error:
        return None, (
            f" (the original {type(exc).__name__} cannot be sent to the main "
            f"process: {type(error).__name__}: {error})"
        )
    return exc, ""


def _pickled_replies(replies: list[Reply]) -> memoryview:
    """``replies`` pickled, or an error reply if they do not pickle.

    E.g. ``get_attr`` of an attribute holding a lock: the main process gets
    an EnvError and the worker and its envs stay usable (nothing reaches the
    pipe before pickling succeeded).
    """
    try:
        payload = ForkingPickler.dumps(replies)
    except Exception as exc:
        message = (
            f"the worker's reply ({[type(reply).__name__ for reply in replies]}) "
            f"cannot be pickled back to the main process ({type(exc).__name__}: "
            f"{exc}); results of call()/get_attr() and TrajInfo extras must be "
            "picklable"
        )
        error = WorkerError(message, None, traceback.format_exc(), os.getpid())
        payload = ForkingPickler.dumps([error])
    return payload


def _send_error(conn: Connection, exc: BaseException) -> None:
    try:
        conn.send(error_reply(exc))
    except Exception:
        pass
