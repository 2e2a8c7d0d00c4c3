"""Env calls and attributes of a ProcessCage, sent to wherever each env lives.

Each request goes once to every process owning some of the asked envs (the
main process's share runs it directly); results come back in the order of
the asked indices. The wrapper rules for reaching an attribute are
:mod:`parllel.cages.env_access`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle

from parllel.cages.protocol import (
    ApplyToEnvs,
    CallEnvs,
    Request,
    SetEnvAttr,
    WaitingEnvs,
)
from parllel.cages.stepping import SteppingProcesses
from parllel.cages.worker_handle import WorkerHandle


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
