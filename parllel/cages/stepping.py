"""The processes that step a ProcessCage's envs, and requests to any of them.

A ProcessCage's envs are split into contiguous ranges: optionally
``[0, main_process_envs)`` stepped by the main process itself, then one range
per worker, in order. :class:`SteppingProcesses` holds them (and the shared
control array), finds the process that owns an env, runs a request
(:mod:`parllel.cages.protocol`) wherever the env lives, and releases
everything on close.
"""

from __future__ import annotations

from typing import Any

from parllel.arrays import Array
from parllel.cages.env_group import EnvGroup
from parllel.cages.protocol import Request
from parllel.cages.worker_handle import WorkerHandle
from parllel.errors import CageError, ConfigError

# A stepping process and its cage-local env range: (worker, or None for the
# main process, lo, hi)
Stepping = tuple[WorkerHandle | None, int, int]


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
