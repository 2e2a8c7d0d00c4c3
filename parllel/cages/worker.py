"""The worker process: a plain function with a command loop.

Hot-path protocol (one synchronization per worker per step): the main process
writes a command and small integers into this worker's row of a shared
``int64`` control array and releases ``command_ready``; the worker does the
work, writing straight into shared-memory slots, sets its status and releases
``work_done``. Slots are named by small integer ids; the descriptors behind
the ids (segment name, offset, shape, strides) arrive over the pipe once, the
first time a slot is used. Anything else (env calls, finished episodes,
errors) travels over the pipe, and only when it exists.
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import signal
import time
import traceback
from multiprocessing.reduction import ForkingPickler
from typing import Any

import cloudpickle
import numpy as np

from parllel.arrays import attach_view
from parllel.cages.env_group import EnvGroup
from parllel.cages.sync import wait_for
from parllel.cages.traj_info import TrajInfo
from parllel.tree import ArrayDict

# control-array layout (one row per worker)
CMD, N_MESSAGES, LAYOUT, N_IDS, IDS = 0, 1, 2, 3, 4
STATUS = -1
SPIN_MICROSECONDS = -2  # how long an idle worker polls before blocking (set by main)
N_EPISODES = -3  # episodes that ended in this step, recorded in the row's tail
STEP_SECONDS = -4  # float64: how long the last step of the envs took (balancing)
CONTROL_WIDTH = 256
EPISODES = 128  # start of the episode records (float64 view of the row)
EPISODE_FIELDS = (
    6  # env_index, length, return_, discounted_return, terminated, truncated
)
MAX_EPISODES = (CONTROL_WIDTH - 4 - EPISODES) // EPISODE_FIELDS
MAX_LEAVES = EPISODES - IDS - 1
MAX_TREES = 4096  # slot trees a worker remembers (one per row of a batch)

# commands
STEP, RESET, MESSAGES_ONLY, CLOSE = 1, 2, 3, 4
# on this signal a worker's faulthandler writes its Python stack to the main
# process (step_timeout); signal 0 (none) where there is no SIGUSR1
STACK_SIGNAL = getattr(signal, "SIGUSR1", 0)
# status
OK, HAS_MESSAGES = 0, 1


class ParentGone(Exception):
    """The main process died; the worker exits quietly."""


def build_tree(layout: tuple[tuple, tuple], views: list[Any]) -> ArrayDict:
    """Nest flat leaf views into ArrayDicts following ``layout``.

    ``layout`` is ``(leaf paths, paths of tuple-built nodes)``; those nodes
    become sequence ArrayDicts, as in the main process's tree.
    """
    paths, sequences = layout
    root: dict[str, Any] = {}
    for path, view in zip(paths, views):
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = view
    return _nest(root, (), frozenset(sequences))


def _nest(node: dict, prefix: tuple[str, ...], sequences: frozenset) -> ArrayDict:
    return ArrayDict(
        {
            key: _nest(value, prefix + (key,), sequences)
            if type(value) is dict
            else value
            for key, value in node.items()
        },
        sequence=prefix in sequences,
    )


def worker_main(
    worker_index: int,
    conn: Any,
    control: Any,
    command_ready: Any,
    work_done: Any,
    factory_bytes: bytes,
    group_kwargs: dict[str, Any],
    env_slice: tuple[int, int],
    spin_seconds: float,
    want_example: bool,
    cpus: tuple[int, ...] | None = None,
    stack_conn: Any = None,
) -> None:
    """Entry point of a worker process (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    if stack_conn is not None and STACK_SIGNAL:
        # dumps every thread's stack even when stuck in C code holding the GIL
        faulthandler.register(STACK_SIGNAL, file=stack_conn.fileno(), all_threads=True)
    if cpus:
        os.sched_setaffinity(0, cpus)  # checked by the cage
    parent = mp.parent_process()
    row = control.to_ndarray()[worker_index]
    group = None

    def check_parent() -> None:
        if parent is not None and not parent.is_alive():
            raise ParentGone

    try:
        env_factory, env_kwargs = cloudpickle.loads(factory_bytes)
        group = EnvGroup(env_factory, env_kwargs, **group_kwargs)
        example = group.example_step() if want_example else None
        conn.send(("ready", group.spaces, example))
    except BaseException as exc:
        _send_error(conn, exc)
        if group is not None:
            group.close()
        return
    bounds = list(env_slice)  # this worker's [lo, hi) env range (moves when balancing)
    views: dict[int, Any] = {}
    layouts: dict[int, tuple] = {}
    trees: dict[tuple, dict] = {}
    seconds = row.view(np.float64)
    clock = time.perf_counter
    try:
        while True:
            spin = row[SPIN_MICROSECONDS] * 1e-6 if spin_seconds < 0 else spin_seconds
            wait_for(command_ready, spin, check_parent, poll_seconds=0.5)
            command = int(row[CMD])
            row[STATUS] = OK
            row[N_EPISODES] = 0
            replies: list[tuple] = []
            try:
                for _ in range(int(row[N_MESSAGES])):
                    replies += _handle_message(
                        conn.recv(), group, views, layouts, bounds
                    )
                if command == STEP or command == RESET:
                    n_ids = int(row[N_IDS])
                    key = (int(row[LAYOUT]), *row[IDS : IDS + n_ids])
                    tree = trees.get(key)
                    if tree is None:
                        if len(trees) >= MAX_TREES:
                            trees.clear()
                        tree = trees[key] = build_tree(
                            layouts[key[0]], [views[i] for i in key[1:]]
                        )
                    if command == STEP:
                        start = clock()
                        completed = group.step(tree["action"], tree["out"], bounds[0])
                        seconds[STEP_SECONDS] = clock() - start
                        if completed and not _record_episodes(row, completed):
                            replies.append(("trajs", completed))
                    else:
                        indices = _decode_indices(row, n_ids)
                        group.reset(tree["observation"], indices, bounds[0])
                elif command == CLOSE:
                    break
            except ParentGone:
                raise
            except BaseException as exc:
                replies.append(_error_reply(exc))
            if replies:
                row[STATUS] = HAS_MESSAGES
                _send_replies(conn, replies)
            work_done.release()
    except (ParentGone, EOFError, BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        group.close()
        conn.close()


def _record_episodes(row: Any, completed: list) -> bool:
    """Write plain TrajInfos into the control row (no pipe, no pickling).

    Only for :class:`TrajInfo` itself with nothing in ``extra`` or
    ``reset_info`` (the common case: most env infos are empty or fully
    preallocated); returns False to send them over the pipe instead.
    """
    if len(completed) > MAX_EPISODES:
        return False
    for traj in completed:
        if type(traj) is not TrajInfo or traj.extra or traj.reset_info or traj.lost:
            return False
    records = row.view(np.float64)
    for j, traj in enumerate(completed):
        start = EPISODES + EPISODE_FIELDS * j
        records[start : start + EPISODE_FIELDS] = (
            traj.env_index, traj.length, traj.return_, traj.discounted_return,
            traj.terminated, traj.truncated,
        )  # fmt: skip
    row[N_EPISODES] = len(completed)
    return True


def read_episodes(row: Any, make_traj: Any) -> list:
    """TrajInfos recorded by :func:`_record_episodes` (main process side)."""
    count = int(row[N_EPISODES])
    if not count:
        return []
    records = row.view(np.float64)[EPISODES : EPISODES + EPISODE_FIELDS * count]
    trajs = []
    for env_index, length, ret, discounted, terminated, truncated in records.reshape(
        count, EPISODE_FIELDS
    ).tolist():
        traj = make_traj(int(env_index))
        traj.length = int(length)
        traj.return_ = ret
        traj.discounted_return = discounted
        traj._current_discount = traj.discount**traj.length
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
        trajs.append(traj)
    return trajs


def _decode_indices(row: Any, n_ids: int) -> list[int] | None:
    # RESET stores the number of env indices after the view ids (-1: all)
    start = IDS + n_ids
    count = int(row[start])
    if count < 0:
        return None
    return [int(i) for i in row[start + 1 : start + 1 + count]]


def _handle_message(
    message: tuple,
    group: EnvGroup,
    views: dict,
    layouts: dict,
    bounds: list[int],
) -> list[tuple]:
    kind = message[0]
    if kind == "views":
        for view_id, descriptor in message[1]:
            views[view_id] = attach_view(descriptor)  # over all envs of the cage
        return []
    if kind == "layout":
        layouts[message[1]] = message[2]
        return []
    if kind in ("give", "take"):  # load balancing: envs leave or join this range
        lo, hi = bounds
        if kind == "give":
            _, first, count = message
            result = group.give_envs(first, count)
            bounds[:] = (lo + count, hi) if first else (lo, hi - count)
        else:
            _, result, first = message
            group.take_envs(result, first)
            count = len(result)
            bounds[:] = (lo - count, hi) if first else (lo, hi + count)
            result = None
        return [("result", result)]
    if kind == "call":
        _, name, args, kwargs, indices = message
        return [("result", group.call(name, args, kwargs, indices))]
    if kind == "set_attr":
        _, name, values, indices = message
        group.set_attr(name, values, indices)
        return [("result", None)]
    if kind == "waiting":
        return [("result", group.waiting())]
    raise ValueError(f"unknown worker message {kind!r}")


def _error_reply(exc: BaseException) -> tuple:
    env_index = getattr(exc, "env_index", None)
    tb = getattr(exc, "worker_traceback", "") or traceback.format_exc()
    return ("error", f"{type(exc).__name__}: {exc}", env_index, tb, os.getpid())


def _send_replies(conn: Any, replies: list[tuple]) -> None:
    """Send ``replies``, or an error reply if they do not pickle.

    E.g. ``get_attr`` of an attribute holding a lock: the main process gets
    an EnvError and the worker and its envs stay usable (nothing reaches the
    pipe before pickling succeeded).
    """
    try:
        payload = ForkingPickler.dumps(replies)
    except Exception as exc:
        message = (
            f"the worker's reply ({[reply[0] for reply in replies]}) cannot be "
            f"pickled back to the main process ({type(exc).__name__}: {exc}); "
            "results of call()/get_attr() and TrajInfo extras must be picklable"
        )
        payload = ForkingPickler.dumps(
            [("error", message, None, traceback.format_exc(), os.getpid())]
        )
    conn.send_bytes(payload)


def _send_error(conn: Any, exc: BaseException) -> None:
    try:
        conn.send([_error_reply(exc)])
    except Exception:
        pass
