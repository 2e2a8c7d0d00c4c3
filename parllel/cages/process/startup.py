"""Starting a ProcessCage: its settings checked, its envs split, its processes started.

The checks of the cage's arguments (:func:`split_envs`, :func:`check_cpus`,
...), what every process builds its envs with (:class:`GroupSettings`),
starting one worker (:func:`spawn_worker`) and all of them with the main
process's share, waiting for each worker's handshake
(:func:`start_processes`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from parllel.arrays import Array
from parllel.cages.balance import Balancer, LoadBalancer
from parllel.cages.env_group import EnvGroup
from parllel.cages.plumbing import default_worker_count, usable_cores
from parllel.cages.probe import spaces_example
from parllel.cages.process.channel import CONTROL_WIDTH, WorkerConfig
from parllel.cages.process.processes import SteppingProcesses
from parllel.cages.process.worker_handle import WorkerHandle, WorkerLost
from parllel.cages.spaces import EnvSpaces, check_spaces_agree
from parllel.cages.traj_info import TrajInfo
from parllel.errors import CageError, ConfigError

if TYPE_CHECKING:
    from parllel.cages.plumbing import StartContext

DEATH_POLICIES = ("raise", "restart")
DEFAULT_STEP_TIMEOUT = 300.0  # seconds; generous: only a hung env should reach it


def split_envs(
    n_envs: int, n_main: int, envs_per_worker: int | None, n_workers: int | None
) -> list[tuple[int, int]]:
    """Cage-local ``[lo, hi)`` env ranges of the workers (main's share is ``[0, n_main)``)."""
    remaining = n_envs - n_main
    if remaining < 1:
        raise ConfigError(
            f"main_process_envs ({n_main}) leaves no env for the workers out of {n_envs}"
        )
    if envs_per_worker is not None:
        if envs_per_worker < 1:
            raise ConfigError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        n_workers = math.ceil(remaining / envs_per_worker)
    elif n_workers is None:
        n_workers = default_worker_count(usable_cores(), main_steps=n_main > 0)
    if n_workers < 1:
        raise ConfigError(f"n_workers must be >= 1, got {n_workers}")
    n_workers = min(n_workers, remaining)
    bounds = np.linspace(n_main, n_envs, n_workers + 1).round().astype(int)
    return [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]


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


def make_balancer(rebalance: bool | Balancer) -> Balancer | None:
    """The balancer a ``rebalance`` argument asks for (True: a default LoadBalancer)."""
    if isinstance(rebalance, bool):
        return LoadBalancer() if rebalance else None
    if not callable(getattr(rebalance, "propose", None)):
        raise ConfigError(
            "rebalance must be True/False or an object with a propose(seconds, "
            f"counts) method (e.g. LoadBalancer()), got {rebalance!r}"
        )
    return rebalance


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
        reset_mode: as for the cage.
        traj_info_type: as for the cage.
        traj_info_kwargs: as for the cage.
        keep_infos: as for the cage.
        clip_actions: as for the cage.
        spin_seconds: the workers' idle polling budget (negative: automatic).
        cpus: CPUs to pin the workers to, or None.
    """

    ctx: StartContext
    env_factory: Callable[..., Any]
    env_kwargs: dict[str, Any]
    factory_bytes: bytes
    reset_mode: str
    traj_info_type: Callable[..., TrajInfo]
    traj_info_kwargs: dict[str, Any]
    keep_infos: bool
    clip_actions: bool
    spin_seconds: float
    cpus: tuple[int, ...] | None

    def group_kwargs(
        self, env_indices: tuple[int, ...], env_seeds: Sequence[int] | None
    ) -> dict[str, Any]:
        """EnvGroup keyword arguments for these envs (seeds aligned with them)."""
        return {
            "env_indices": env_indices,
            "env_seeds": None if env_seeds is None else tuple(env_seeds),
            "reset_mode": self.reset_mode,
            "traj_info_type": self.traj_info_type,
            "traj_info_kwargs": self.traj_info_kwargs,
            "keep_infos": self.keep_infos,
            "clip_actions": self.clip_actions,
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
    probe: bool = True,
) -> tuple[EnvSpaces, dict[str, Any]]:
    """Start the workers (``slices``) and the main process's share; their spaces and example.

    The example step comes from a probe env of the process that builds env 0:
    the main process if it steps envs, else worker 0 (where the factory is
    known to work, and which sends it with its spaces). Without ``probe``:
    zeros of the spaces (:func:`~parllel.cages.probe.spaces_example`).

    Raises:
        WorkerDiedError: a worker died or hung before it was ready.
        SpaceMismatchError: processes' envs disagree about their spaces.
    """
    processes.control = Array(
        (len(slices),), (CONTROL_WIDTH,), np.int64, storage="shared"
    )
    main = processes.main_process_envs
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
