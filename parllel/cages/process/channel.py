"""The channel between a ProcessCage and its workers: control row, messages, replies.

Per step, a shared ``int64`` control row per worker (:class:`Row`) and two
semaphores carry the command and the status; rare typed messages (slot
layouts, env requests, replies) cross a pipe only when they exist. Each side
writes the pipe only after releasing the semaphore the other waits on, so no
message size can deadlock. :func:`wait_for` polls briefly, then blocks. The
protocol and its timings are in docs/cages.md ("How a process cage steps").
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Semaphore
from typing import TYPE_CHECKING, Any

import cloudpickle
import numpy as np

from parllel.cages.env_info import KeptInfos
from parllel.cages.traj_info import TrajInfo
from parllel.errors import EnvAttributeError, EnvError

if TYPE_CHECKING:  # the worker's envs: typing only, no import below the channel
    from parllel.cages.env_group import EnvGroup

CONTROL_WIDTH = 256  # int64 words per worker row


class Row:
    """Word offsets of the fields of a worker's control row.

    ``COMMAND`` to ``IDS`` are written by the main process before a command;
    ``IDS`` starts the view ids (``N_IDS`` of them), followed for
    ``Command.RESET`` by the number of env indices to reset (-1: all) and the
    worker-local indices. The tail is shared: ``SPIN_MICROSECONDS`` is set by
    the main process, the rest by the worker. ``EPISODES`` and
    ``STEP_SECONDS`` are ``float64`` words (read through a float64 view of the
    row).
    """

    COMMAND = 0  # a Command
    N_MESSAGES = 1  # pipe messages the worker reads before the command
    LAYOUT = 2  # layout id of the slot tree (STEP, RESET)
    N_IDS = 3  # number of view ids
    IDS = 4  # first view id
    EPISODES = 128  # first word of the episode records (float64)
    STEP_SECONDS = CONTROL_WIDTH - 4  # float64: duration of the last step (balancing)
    N_EPISODES = CONTROL_WIDTH - 3  # episode records written by the last step
    SPIN_MICROSECONDS = CONTROL_WIDTH - 2  # how long an idle worker polls
    STATUS = CONTROL_WIDTH - 1  # a Status


class Command:
    """What the worker does with the control row (plain ints, written per step)."""

    STEP = 1  # step the envs into the slot tree; record finished episodes
    RESET = 2  # reset all or some envs into the slot tree's observation
    MESSAGES = 3  # only handle the pipe messages (requests)
    CLOSE = 4  # exit


class Status:
    """How a worker finished a command (plain ints, written per step)."""

    OK = 0
    HAS_REPLIES = 1  # replies wait on the pipe


# Finished episodes recorded in the row instead of pickled, one record each
EPISODE_FIELDS = (
    "env_index", "length", "return_", "discounted_return", "terminated", "truncated",
)  # fmt: skip
RECORD_WIDTH = len(EPISODE_FIELDS)
MAX_EPISODES = (Row.STEP_SECONDS - Row.EPISODES) // RECORD_WIDTH
MAX_LEAVES = Row.EPISODES - Row.IDS - 1  # view ids of one slot tree
MAX_TREES = 4096  # slot trees a worker remembers (one per row of a batch)

# On this signal a worker's faulthandler writes its Python stack to the main
# process (step_timeout); signal 0 (none) where there is no SIGUSR1.
STACK_SIGNAL = getattr(signal, "SIGUSR1", 0)


# -- start-up -------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process is started with (besides its pipe and semaphores).

    Attributes:
        index: the worker's index (its row of the control array).
        factory_bytes: cloudpickled ``(env_factory, env_kwargs, sources)``
            (:class:`~parllel.cages.code_sources.CodeSources`).
        group_kwargs: keyword arguments of its :class:`~parllel.cages.EnvGroup`.
        env_slice: cage-local ``[lo, hi)`` range of its envs.
        spin_seconds: idle polling budget (negative: read it from the row).
        want_example: send an example step with :class:`Ready`.
        cpus: CPUs to pin the worker to, or None.
    """

    index: int
    factory_bytes: bytes
    group_kwargs: dict[str, Any]
    env_slice: tuple[int, int]
    spin_seconds: float
    want_example: bool
    cpus: tuple[int, ...] | None = None


# -- slot messages (main -> worker) ------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """A slot-tree layout: the tree with leaf positions in place of its views.

    The worker rebuilds a step's tree from it and the step's view ids (leaf
    ``j`` is view ``ids[j]``), with the same nesting and node types.
    """

    layout_id: int
    skeleton: Any


@dataclass(frozen=True)
class Views:
    """Descriptors (:func:`parllel.arrays.describe_view`) of new view ids."""

    descriptors: list[tuple[int, Any]]


# -- requests (main -> worker, answered by a Result) -------------------------------
@dataclass(frozen=True)
class GiveEnvs:
    """Remove ``count`` envs from the front (``first``) or end; result: payloads."""

    first: bool
    count: int

    def run(self, group: EnvGroup) -> list[bytes]:
        """Carry the request out on an EnvGroup."""
        return group.give_envs(self.first, self.count)

    def moved_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The group's env range after this request."""
        return (lo + self.count, hi) if self.first else (lo, hi - self.count)


@dataclass(frozen=True)
class TakeEnvs:
    """Add envs given by a neighbour at the front (``first``) or end."""

    payloads: list[bytes]
    first: bool

    def run(self, group: EnvGroup) -> None:
        """Carry the request out on an EnvGroup."""
        group.take_envs(self.payloads, self.first)

    def moved_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The group's env range after this request."""
        count = len(self.payloads)
        return (lo - count, hi) if self.first else (lo, hi + count)


@dataclass(frozen=True)
class CallEnvs:
    """Call (or read) attribute ``name`` of the envs at local ``indices``."""

    name: str
    args: tuple
    kwargs: dict[str, Any]
    indices: list[int]

    def run(self, group: EnvGroup) -> list[Any]:
        """Carry the request out on an EnvGroup."""
        return group.call(self.name, self.args, self.kwargs, self.indices)


@dataclass(frozen=True)
class ApplyToEnvs:
    """Run a function (cloudpickled) on each env at local ``indices``."""

    function_bytes: bytes
    args: tuple
    kwargs: dict[str, Any]
    indices: list[int]

    def run(self, group: EnvGroup) -> list[Any]:
        """Carry the request out on an EnvGroup."""
        function = cloudpickle.loads(self.function_bytes)
        return group.apply(function, self.args, self.kwargs, self.indices)


@dataclass(frozen=True)
class SetEnvAttr:
    """Set attribute ``name`` of the envs at local ``indices`` to ``values``."""

    name: str
    values: list[Any]
    indices: list[int]

    def run(self, group: EnvGroup) -> None:
        """Carry the request out on an EnvGroup."""
        group.set_attr(self.name, self.values, self.indices)


@dataclass(frozen=True)
class WaitingEnvs:
    """Local indices of the envs waiting for a reset (wait mode)."""

    def run(self, group: EnvGroup) -> list[int]:
        """Carry the request out on an EnvGroup."""
        return group.waiting()


@dataclass(frozen=True)
class ResetArgs:
    """Seeds (by cage-local env index) and options for the RESET that follows."""

    seeds: dict[int, int | None] | None
    options: dict | None


Request = GiveEnvs | TakeEnvs | CallEnvs | ApplyToEnvs | SetEnvAttr | WaitingEnvs
Message = Layout | Views | ResetArgs | Request


# -- replies (worker -> main) ---------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    """The worker built its envs: their spaces and, if asked, an example step."""

    spaces: Any
    example: dict[str, Any] | None


@dataclass(frozen=True)
class Result:
    """The value of a request."""

    value: Any


@dataclass(frozen=True)
class Episodes:
    """Finished episodes that do not fit the control row (any TrajInfo)."""

    trajs: list[TrajInfo]


@dataclass(frozen=True)
class WorkerError:
    """An exception raised in the worker, with what the main process reports."""

    message: str  # "ExceptionType: message"
    env_index: int | None
    traceback: str
    pid: int
    missing_attribute: bool = False  # the env lacks an attribute asked for
    cause: BaseException | None = None  # the env's own exception, if it pickles

    def exception(self) -> EnvError:
        """The EnvError (EnvAttributeError for a missing attribute) to raise,
        with the env's own exception as its ``__cause__``."""
        where = f" (env {self.env_index})" if self.env_index is not None else ""
        # an env lacking an attribute stays catchable as AttributeError
        error = (EnvAttributeError if self.missing_attribute else EnvError)(
            f"error in worker process{where}: {self.message}\n"
            f"--- worker traceback ---\n{self.traceback}",
            env_index=self.env_index,
            worker_traceback=self.traceback,
        )
        error.__cause__ = self.cause
        return error


@dataclass(frozen=True)
class Infos:
    """The info dicts a step or reset produced (cages with ``keep_infos``)."""

    infos: KeptInfos


Reply = Ready | Result | Episodes | Infos | WorkerError


# -- control-row helpers ---------------------------------------------------------------
def record_episodes(row: np.ndarray, completed: list[TrajInfo]) -> bool:
    """Write plain finished episodes into the control row (no pipe, no pickling).

    Only for :class:`~parllel.cages.TrajInfo` itself with nothing in
    ``extra`` or ``reset_info`` (the common case: most env infos are empty or
    fully preallocated); returns False to send them as :class:`Episodes`.
    """
    if len(completed) > MAX_EPISODES:
        return False
    for traj in completed:
        if (
            type(traj) is not TrajInfo
            or traj.extra
            or traj.reset_info
            or traj.lost
            or traj.partial
        ):
            return False
    records = row.view(np.float64)
    for j, traj in enumerate(completed):
        start = Row.EPISODES + RECORD_WIDTH * j
        records[start : start + RECORD_WIDTH] = (
            traj.env_index, traj.length, traj.return_, traj.discounted_return,
            traj.terminated, traj.truncated,
        )  # fmt: skip
    row[Row.N_EPISODES] = len(completed)
    return True


def read_episodes(
    row: np.ndarray, make_traj: Callable[[int], TrajInfo]
) -> list[TrajInfo]:
    """TrajInfos recorded by :func:`record_episodes` (main process side)."""
    count = int(row[Row.N_EPISODES])
    if not count:
        return []
    start = Row.EPISODES
    records = row.view(np.float64)[start : start + RECORD_WIDTH * count]
    trajs = []
    for env_index, length, ret, discounted, terminated, truncated in records.reshape(
        count, RECORD_WIDTH
    ).tolist():
        traj = make_traj(int(env_index))
        traj.length = int(length)
        traj.return_ = ret
        traj.discounted_return = discounted
        traj._current_discount = traj.discount**traj.length
        traj.terminated, traj.truncated = bool(terminated), bool(truncated)
        trajs.append(traj)
    return trajs


def reset_extra(indices: Sequence[int] | None) -> list[int]:
    """The words after a RESET's view ids: count (-1: all envs) and local indices."""
    if indices is None:
        return [-1]
    return [len(indices), *indices]


def read_reset_indices(row: np.ndarray, n_ids: int) -> list[int] | None:
    """Local env indices of a RESET (written by :func:`reset_extra`), None for all."""
    start = Row.IDS + n_ids
    count = int(row[start])
    if count < 0:
        return None
    return [int(i) for i in row[start + 1 : start + 1 + count]]


# -- waiting ---------------------------------------------------------------------
_sched_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def wait_for(
    semaphore: Semaphore,
    spin_seconds: float,
    check_alive: Callable[[], None],
    poll_seconds: float = 0.1,
) -> None:
    """Acquire ``semaphore``: poll-and-yield up to ``spin_seconds``, then block.

    While blocked, ``check_alive()`` runs every ``poll_seconds``; it should
    raise (e.g. :class:`~parllel.errors.WorkerDiedError`) if the peer that
    would release the semaphore is gone, so a wait never hangs.
    """
    acquire = semaphore.acquire
    if acquire(False):
        return
    if spin_seconds > 0:
        deadline = time.perf_counter() + spin_seconds
        while True:
            _sched_yield()
            if acquire(False):
                return
            if time.perf_counter() > deadline:
                break
    while not acquire(True, poll_seconds):
        check_alive()
