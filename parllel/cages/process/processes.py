"""The processes that step a ProcessCage's envs: who steps which, requests, moves.

The envs are split into contiguous ranges (the main process's share first,
then one per worker); :class:`SteppingProcesses` finds the owner of an env
and runs a request wherever it lives. Env calls and attributes go once to
every owning process, results in the order asked. :func:`balance` and
:func:`move_envs` move envs between neighbours at the ranges' ends, so
ranges stay contiguous and results bit-identical (docs/cages.md, "Load
balancing").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import cloudpickle

from parllel._warnings import warn_at_caller
from parllel.arrays import Array
from parllel.cages.env_group import EnvGroup
from parllel.cages.layout.balance import Balancer, Move
from parllel.cages.process.channel import (
    ApplyToEnvs,
    CallEnvs,
    GiveEnvs,
    Request,
    Row,
    SetEnvAttr,
    TakeEnvs,
    WaitingEnvs,
)
from parllel.errors import (
    CageError,
    ConfigError,
    EnvError,
    ParllelWarning,
)

if TYPE_CHECKING:  # typing only: the handles sit below the cage, not below this
    from parllel.cages.process.worker_handle import WorkerHandle

# A stepping process and its cage-local env range: (worker, or None for the
# main process, lo, hi)
Stepping = tuple["WorkerHandle | None", int, int]


class SteppingProcesses:
    """The main process's share (if any) and the workers of one ProcessCage.

    Also everything the cage must release, so that its GC/exit finalizer can
    hold this object without holding the cage.

    Args:
        n_envs: envs of the cage.
        env_offset: global index of the cage's first env.
        main_process_envs: envs ``[0, main_process_envs)`` stepped in the main
            process (0: none).
        main_spin_seconds: how long the main process polls for a worker's
            answer to a request before blocking.
    """

    def __init__(
        self,
        n_envs: int,
        env_offset: int,
        main_process_envs: int,
        main_spin_seconds: float,
    ) -> None:
        self.n_envs = n_envs
        self.env_offset = env_offset
        self.main_process_envs = main_process_envs
        self.main_spin_seconds = main_spin_seconds
        self.workers: list[WorkerHandle] = []
        self.control: Array | None = None
        self.main_group: EnvGroup | None = None

    def env_indices(self, lo: int, hi: int) -> tuple[int, ...]:
        """Global indices of the cage-local env range ``[lo, hi)``."""
        return tuple(self.env_offset + i for i in range(lo, hi))

    def ranges(self) -> list[Stepping]:
        """``(worker or None for the main process, lo, hi)`` in env order."""
        main = self.main_process_envs
        share: list[Stepping] = [(None, 0, main)] if main else []
        return share + [(w, *w.env_slice) for w in self.workers]

    def set_ranges(self, ranges: list[Stepping]) -> None:
        """Record new env ranges (after envs moved between processes)."""
        for worker, lo, hi in ranges:
            if worker is None:
                self.main_process_envs = hi
            else:
                worker.env_slice = (lo, hi)
                worker.env_indices = self.env_indices(lo, hi)

    def owner(self, index: int) -> tuple[WorkerHandle | None, int]:
        """The process stepping cage-local env ``index`` (in ``[0, n_envs)``:
        ``Cage`` normalized it), and its local index."""
        if 0 <= index < self.main_process_envs:
            return None, index
        for worker in self.workers:
            lo, hi = worker.env_slice
            if lo <= index < hi:
                return worker, index - lo
        raise ConfigError(f"env index {index} out of range for {self.n_envs} envs")

    def run(self, owner: WorkerHandle | None, request: Request) -> Any:
        """Run ``request`` in the main process's share (``owner`` None) or a worker.

        Raises:
            EnvError: the request raised (in a worker: with its traceback).
            WorkerDiedError: the worker died meanwhile.
        """
        if owner is None:
            if self.main_group is None:
                raise CageError("internal: the main process steps no envs")
            return request.run(self.main_group)
        return owner.request(request, self.main_spin_seconds)

    def release(self) -> None:
        """Stop every worker, close the main share's envs, unlink the control array."""
        for worker in self.workers:
            worker.stop()
        self.workers = []
        if self.main_group is not None:
            self.main_group.close()
            self.main_group = None
        if self.control is not None:
            self.control.close()
            self.control = None


# -- env calls and attributes --------------------------------------------------
def _by_owner(
    processes: SteppingProcesses, indices: Sequence[int]
) -> dict[WorkerHandle | None, list[tuple[int, int]]]:
    """``(index, local index)`` pairs of ``indices``, grouped by owning process."""
    groups: dict[WorkerHandle | None, list[tuple[int, int]]] = {}
    for index in indices:
        owner, local = processes.owner(index)
        groups.setdefault(owner, []).append((index, local))
    return groups


def _ask(
    processes: SteppingProcesses,
    request_for: Callable[[list[int]], Request],
    indices: Sequence[int],
) -> dict[int, Any]:
    """Send ``request_for(local indices)`` to the owners of ``indices``; results by index."""
    results: dict[int, Any] = {}
    for owner, pairs in _by_owner(processes, indices).items():
        values = processes.run(owner, request_for([local for _, local in pairs]))
        if values is not None:
            results.update({index: value for (index, _), value in zip(pairs, values)})
    return results


def call_envs(
    processes: SteppingProcesses,
    name: str,
    args: tuple,
    kwargs: dict[str, Any],
    indices: list[int],
) -> list[Any]:
    """Each indexed env's method ``name`` called (or attribute ``name`` read)."""
    results = _ask(
        processes, lambda local: CallEnvs(name, args, kwargs, local), indices
    )
    return [results[i] for i in indices]


def apply_to_envs(
    processes: SteppingProcesses,
    function: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
    indices: list[int],
) -> list[Any]:
    """``function(env, *args, **kwargs)`` for each indexed env, where the env lives."""
    function_bytes = cloudpickle.dumps(function)
    results = _ask(
        processes,
        lambda local: ApplyToEnvs(function_bytes, args, kwargs, local),
        indices,
    )
    return [results[i] for i in indices]


def set_env_attrs(
    processes: SteppingProcesses, name: str, values: list[Any], indices: list[int]
) -> None:
    """Set attribute ``name`` of each indexed env (main process's share first)."""
    value_of = dict(zip(indices, values))  # a repeated index: its last value
    groups = _by_owner(processes, indices)
    for owner in [None, *processes.workers]:
        pairs = groups.get(owner)
        if pairs:
            values_here = [value_of[index] for index, _ in pairs]
            local = [local for _, local in pairs]
            processes.run(owner, SetEnvAttr(name, values_here, local))


def waiting_envs(processes: SteppingProcesses) -> list[int]:
    """Cage-local indices of the envs waiting for a reset, in every process."""
    waiting: list[int] = []
    for owner, lo, _ in processes.ranges():
        waiting += [lo + i for i in processes.run(owner, WaitingEnvs())]
    return sorted(waiting)


# -- load balancing ------------------------------------------------------------
class EnvsNotMovable(Exception):
    """The giving process refused to give envs away (they do not pickle fully)."""


def propose_move(
    processes: SteppingProcesses, balancer: Balancer, main_seconds: float
) -> Move | None:
    """Report the last step's times (the main process's: ``main_seconds``)."""
    ranges = processes.ranges()
    seconds = [
        main_seconds if worker is None else float(worker.row_floats[Row.STEP_SECONDS])
        for worker, _, _ in ranges
    ]
    return balancer.propose(seconds, [hi - lo for _, lo, hi in ranges])


def balance(
    processes: SteppingProcesses, balancer: Balancer, main_seconds: float
) -> str | None:
    """Ask ``balancer`` after a step and carry out its move, if any.

    Returns why the envs cannot move (after a
    :class:`~parllel.errors.ParllelWarning`, with the current split
    kept) when they turned out not to be movable: balancing should be
    switched off. None otherwise.
    """
    move = propose_move(processes, balancer, main_seconds)
    if move is None:
        return None
    try:
        move_envs(processes, *move)
    except EnvsNotMovable as exc:
        warn_at_caller(
            f"ProcessCage load balancing switched off: {exc}", ParllelWarning
        )
        return str(exc)
    return None


def move_envs(processes: SteppingProcesses, giver: int, taker: int, count: int) -> None:
    """Move ``count`` envs from stepping process ``giver`` to its neighbour ``taker``.

    Processes are numbered in env order (the main process's share first).

    Raises:
        ConfigError: not neighbours, or the giver would keep no env.
        EnvsNotMovable: the giver's envs cannot be pickled with their state
            (nothing moved).
        EnvError: the taker failed (the envs went back to the giver).
    """
    ranges = processes.ranges()
    if abs(giver - taker) != 1 or min(giver, taker) < 0:
        raise ConfigError(f"cannot move envs from process {giver} to {taker}")
    _, lo, hi = ranges[giver]
    if not 0 < count < hi - lo:
        raise ConfigError(
            f"cannot move {count} of process {giver}'s {hi - lo} envs: it keeps "
            "at least one"
        )
    first = giver > taker  # the giver's first envs go to its left neighbour
    give, take = ranges[giver][0], ranges[taker][0]
    try:
        payloads = _run(processes, give, GiveEnvs(first, count))
    except EnvError as exc:
        raise EnvsNotMovable(str(exc)) from exc
    try:
        _run(processes, take, TakeEnvs(payloads, not first))
    except EnvError:
        _run(processes, give, TakeEnvs(payloads[::-1], first))  # give them back
        raise
    processes.set_ranges(_moved(ranges, giver, taker, count, first))


def _moved(
    ranges: list[Stepping], giver: int, taker: int, count: int, first: bool
) -> list[Stepping]:
    bounds = [[lo, hi] for _, lo, hi in ranges]
    if first:
        bounds[giver][0] += count
        bounds[taker][1] += count
    else:
        bounds[giver][1] -= count
        bounds[taker][0] -= count
    return [(worker, lo, hi) for (worker, _, _), (lo, hi) in zip(ranges, bounds)]


def _run(
    processes: SteppingProcesses, owner: WorkerHandle | None, request: Request
) -> Any:
    """:meth:`SteppingProcesses.run`; errors of the main process's share as EnvError."""
    if owner is not None:
        return processes.run(owner, request)
    try:
        return processes.run(None, request)
    except Exception as exc:
        raise EnvError(f"in the main process: {type(exc).__name__}: {exc}") from exc
