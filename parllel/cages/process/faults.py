"""Worker faults: restarting a dead worker, and the error for late (hung) workers.

With ``on_worker_death="restart"`` a ProcessCage replaces a dead worker by a
new one stepping the same envs (:func:`restart_worker`): fresh envs with
fresh seeds (:func:`restarted_seeds`), taught every slot the old one knew and
reset into the step's observation slots; the step is reported truncated for
them, with lost episodes (:func:`lost_episodes`). A worker that overruns
``step_timeout`` gives :func:`timeout_error`, with the Python stacks of every
late worker.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from parllel import fields
from parllel.cages.process.channel import Command, reset_extra
from parllel.cages.process.slots import SlotRegistry
from parllel.cages.process.worker_handle import WorkerHandle, WorkerLost
from parllel.cages.traj_info import TrajInfo
from parllel.errors import StepTimeoutError
from parllel.seeding import restart_seed

if TYPE_CHECKING:
    from parllel.cages.process.processes import SteppingProcesses


def restarted_seeds(
    env_seeds: Sequence[int] | None, env_slice: tuple[int, int], restarts: int
) -> tuple[int, ...] | None:
    """The cage's env seeds, with fresh ones (derived from the old) in ``env_slice``."""
    if env_seeds is None:
        return None
    lo, hi = env_slice
    return tuple(
        restart_seed(seed, restarts) if lo <= i < hi else seed
        for i, seed in enumerate(env_seeds)
    )


def restart_worker(
    processes: SteppingProcesses,
    worker: WorkerHandle,
    spawn: Callable[[int, tuple[int, int]], WorkerHandle],
    registry: SlotRegistry,
    out_observation: Any,
    start_timeout: float,
) -> WorkerHandle:
    """Replace the dead ``worker`` and start resetting its envs into ``out_observation``.

    ``spawn(index, env_slice)`` starts the new worker. The caller collects
    the reset (:meth:`WorkerHandle.wait`) like any other.

    Raises:
        WorkerDiedError: the new worker died before it was ready.
    """
    worker.stop()
    new = spawn(worker.index, worker.env_slice)
    processes.workers[worker.index] = new
    try:
        new.handshake(start_timeout)
    except WorkerLost as lost:
        raise lost.worker.died_error(starting=True) from None
    # teach the new worker every slot known so far, then reset its envs
    known = registry.known()
    slots = registry.register({fields.OBSERVATION: out_observation})
    new.command(
        Command.RESET,
        known + slots.messages,
        slots.ids,
        slots.layout_id,
        reset_extra(None),
    )
    return new


def lost_episodes(
    worker: WorkerHandle, out: Any, new_traj: Callable[[int], TrajInfo]
) -> list[TrajInfo]:
    """Mark the dead worker's envs truncated in the step slots ``out``; their episodes."""
    lo, hi = worker.env_slice
    out[fields.REWARD][lo:hi] = 0
    out[fields.TERMINATED][lo:hi] = False
    out[fields.TRUNCATED][lo:hi] = True
    lost = []
    for env_index in worker.env_indices:
        traj = new_traj(env_index)
        traj.lost = traj.truncated = True
        lost.append(traj)
    return lost


def late_workers(pending: list[WorkerHandle]) -> list[WorkerHandle]:
    """``pending[0]`` (known late) and every other pending worker not done yet."""
    return [pending[0]] + [w for w in pending[1:] if not w.work_done.acquire(False)]


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
