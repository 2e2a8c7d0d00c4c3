"""Carrying out load balancing: moving envs between neighbouring stepping processes.

A :class:`~parllel.cages.Balancer` (:mod:`parllel.cages.balance`) proposes
moves from the stepping processes' step times; :func:`propose_move` asks it
and :func:`move_envs` carries a move out: the giver pickles its first (or
last) envs with their episode state (:class:`~parllel.cages.protocol.GiveEnvs`),
the neighbour takes them at its adjoining end
(:class:`~parllel.cages.protocol.TakeEnvs`), so every range stays contiguous
and results stay bit-identical.
"""

from __future__ import annotations

from typing import Any

from parllel._warnings import warn_at_caller
from parllel.cages.balance import Balancer, Move
from parllel.cages.protocol import GiveEnvs, Request, Row, TakeEnvs
from parllel.cages.stepping import Stepping, SteppingProcesses
from parllel.cages.worker_handle import WorkerHandle
from parllel.errors import ConfigError, EnvError, RebalanceRefusedWarning


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
    :class:`~parllel.errors.RebalanceRefusedWarning`, with the current split
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
            f"ProcessCage load balancing switched off: {exc}", RebalanceRefusedWarning
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
