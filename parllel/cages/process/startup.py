"""Starting a ProcessCage: its settings checked, its envs split, its processes started.

The checks of the cage's arguments (:func:`check_cpus`, ...), what every process builds its envs with (:class:`GroupSettings`),
starting one worker (:func:`spawn_worker`) and all of them with the main
process's share, waiting for each worker's handshake
(:func:`start_processes`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from parllel.arrays import Array
from parllel.cages.env_group import EnvGroup
from parllel.cages.options import CageOptions
from parllel.cages.probe import spaces_example
from parllel.cages.process.channel import CONTROL_WIDTH, WorkerConfig
from parllel.cages.process.processes import SteppingProcesses
from parllel.cages.process.worker_handle import WorkerHandle, WorkerLost
from parllel.cages.spaces import EnvSpaces, check_spaces_agree
from parllel.errors import CageError, ConfigError

if TYPE_CHECKING:
    from parllel.cages.child_processes import StartContext

DEATH_POLICIES = ("raise", "restart")
DEFAULT_STEP_TIMEOUT = 300.0  # seconds; generous: only a hung env should reach it


def check_cpus(cpus: Sequence[int] | None) -> tuple[int, ...] | None:
    """Validate a worker CPU set against this process's allowed CPUs."""
    if cpus is None:
        return None
    cpus = tuple(int(cpu) for cpu in cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("worker_cpus needs os.sched_setaffinity (Linux)")
    allowed = os.sched_getaffinity(0)
    if not cpus or not set(cpus) <= allowed:
        raise ConfigError(
            f"worker_cpus {list(cpus)} must be a non-empty subset of the CPUs this "
            f"process may use, {sorted(allowed)}"
        )
    return cpus


def check_death_policy(on_worker_death: str) -> str:
    """Raise ConfigError unless ``on_worker_death`` is one of DEATH_POLICIES."""
    if on_worker_death not in DEATH_POLICIES:
        raise ConfigError(
            f"on_worker_death must be one of {DEATH_POLICIES}, got {on_worker_death!r}"
        )
    return on_worker_death


def check_step_timeout(step_timeout: float | None) -> float | None:
    """``step_timeout`` as a float (or None), or ConfigError unless it is > 0."""
    if step_timeout is not None and not step_timeout > 0:
        raise ConfigError(
            f"step_timeout must be > 0 seconds or None, got {step_timeout}"
        )
    return None if step_timeout is None else float(step_timeout)


@dataclass(frozen=True)
class GroupSettings:
    """What every process of one cage builds its envs with.

    Attributes:
        ctx: multiprocessing context of the workers.
        env_factory: builds one env (in the main process's share).
        env_kwargs: the factory's keyword arguments.
        factory_bytes: both, with the sources of the main script's code,
            cloudpickled (for the workers).
        options: the cage's options.
        spin_seconds: the workers' idle polling budget (negative: automatic).
        cpus: CPUs to pin the workers to, or None.
    """

    ctx: StartContext
    env_factory: Callable[..., Any]
    env_kwargs: dict[str, Any]
    factory_bytes: bytes
    options: CageOptions
    spin_seconds: float
    cpus: tuple[int, ...] | None

    def group_kwargs(
        self, env_indices: tuple[int, ...], env_seeds: Sequence[int] | None
    ) -> dict[str, Any]:
        """EnvGroup keyword arguments for these envs (seeds aligned with them)."""
        return {
            "env_indices": env_indices,
            "env_seeds": None if env_seeds is None else tuple(env_seeds),
            "options": self.options,
        }


def spawn_worker(
    processes: SteppingProcesses,
    settings: GroupSettings,
    index: int,
    env_slice: tuple[int, int],
    env_seeds: Sequence[int] | None,
    want_example: bool = False,
) -> WorkerHandle:
    """Start worker ``index`` stepping the cage-local envs ``env_slice``.

    ``env_seeds``: the seeds of all the cage's envs (or None).
    """
    lo, hi = env_slice
    env_indices = processes.env_indices(lo, hi)
    seeds = None if env_seeds is None else env_seeds[lo:hi]
    config = WorkerConfig(
        index=index,
        factory_bytes=settings.factory_bytes,
        group_kwargs=settings.group_kwargs(env_indices, seeds),
        env_slice=env_slice,
        spin_seconds=settings.spin_seconds,
        want_example=want_example,
        cpus=settings.cpus,
    )
    if processes.control is None:
        raise CageError("internal: workers started before their control array")
    return WorkerHandle(settings.ctx, config, processes.control, env_indices)


def start_processes(
    processes: SteppingProcesses,
    settings: GroupSettings,
    slices: list[tuple[int, int]],
    env_seeds: Sequence[int] | None,
    start_timeout: float,
) -> tuple[EnvSpaces, dict[str, Any]]:
    """Start the workers (``slices``) and the main process's share; their spaces and example.

    The example step comes from a probe env of the process that builds env 0:
    the main process if it steps envs, else worker 0 (where the factory is
    known to work, and which sends it with its spaces). Without the
    ``probe`` option: zeros of the spaces (:func:`~parllel.cages.probe.spaces_example`).

    Raises:
        WorkerDiedError: a worker died or hung before it was ready.
        SpaceMismatchError: processes' envs disagree about their spaces.
    """
    processes.control = Array(
        (len(slices),), (CONTROL_WIDTH,), np.int64, storage="shared"
    )
    main = processes.main_process_envs
    probe = settings.options.probe
    for index, env_slice in enumerate(slices):
        worker = spawn_worker(
            processes,
            settings,
            index,
            env_slice,
            env_seeds,
            probe and index == 0 and not main,
        )
        processes.workers.append(worker)
    spaces: EnvSpaces | None = None
    example = None
    if main:
        processes.main_group = EnvGroup(
            settings.env_factory,
            settings.env_kwargs,
            **settings.group_kwargs(
                processes.env_indices(0, main),
                None if env_seeds is None else env_seeds[:main],
            ),
        )
        spaces = processes.main_group.spaces
        if probe:
            example = processes.main_group.example_step()
    for worker in processes.workers:
        try:
            worker_spaces, worker_example = worker.handshake(start_timeout)
        except WorkerLost as lost:
            raise lost.worker.died_error(starting=True) from None
        if spaces is None:
            spaces, example = worker_spaces, worker_example
        check_spaces_agree(spaces, worker_spaces, worker.env_indices[0])
    if spaces is None:
        raise CageError("internal: a process cage without stepping processes")
    spaces = EnvSpaces(*spaces)
    if not probe:
        return spaces, spaces_example(spaces)
    if example is None:  # worker 0 sends one when the main process steps no envs
        raise CageError("internal: no process sent an example step")
    return spaces, example
