"""ProcessCage: envs stepped in worker processes, straight into shared memory.

The other modules of :mod:`parllel.cages.process` hold its pieces (the
docs/cages.md, "Modules", maps them).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from parllel import fields
from parllel.cages.cage import Cage, ResetRequest
from parllel.cages.cage_checks import check_factory_pickles
from parllel.cages.child_processes import start_context
from parllel.cages.env_group import EnvGroup
from parllel.cages.env_info import KeptInfos
from parllel.cages.layout.process_layout import ProcessLayout
from parllel.cages.main_guard import check_main_guard
from parllel.cages.options import CageOptions
from parllel.cages.process import faults, processes
from parllel.cages.process.channel import (
    Command,
    Episodes,
    Infos,
    Message,
    ResetArgs,
    WorkerError,
    read_episodes,
    reset_extra,
)
from parllel.cages.process.processes import SteppingProcesses
from parllel.cages.process.slots import SlotRegistry
from parllel.cages.process.startup import (
    DEFAULT_STEP_TIMEOUT,
    GroupSettings,
    check_cpus,
    check_death_policy,
    check_step_timeout,
    spawn_worker,
    start_processes,
)
from parllel.cages.process.worker_handle import (
    WorkerHandle,
    WorkerLost,
    WorkerTimeout,
    raise_replies,
)
from parllel.cages.traj_info import TrajInfo
from parllel.errors import ConfigError

STEP_CACHE_SIZE = 4096  # distinct (action, out) slot objects remembered per cage
# What a cage remembers of one (action, out) pair of slot objects: the objects,
# their layout id and view ids, and the main process's (action, out) views.
_StepEntry = tuple[Any, Any, int, np.ndarray, tuple[Any, Any]]


class ProcessCage(Cage):
    """Steps ``n_envs`` envs in worker processes, each holding several envs.

    Workers write results straight into the shared-memory slots passed to
    :meth:`step_async` (allocate with ``storage="shared"``); per step only a few
    integers cross the process boundary. Results are bit-identical to
    :class:`~parllel.cages.SerialCage` (see docs/cages.md).

    Args:
        env_factory: picklable callable (cloudpickle) returning a gymnasium env.
        layout: which process steps which envs (default: one worker per core).
        on_worker_death: ``"raise"`` or ``"restart"`` (episodes reported lost).
        worker_cpus: CPUs the workers may run on (default: no pinning).
        start_method: multiprocessing start method (default forkserver).
        worker_spin_seconds: how long an idle worker polls before blocking.
        main_spin_seconds: how long the main process polls before blocking.
        start_timeout: seconds to wait for workers to build their envs.
        step_timeout: seconds a worker may take per step or reset (None: forever).

    Example:
        >>> layout = ProcessLayout(envs_per_worker=4)
        >>> with ProcessCage(make_env, 8, layout=layout, options=CageOptions(seed=0)) as cage:
        ...     cage.reset(sample_tree.observation[0])
    """

    needs_shared_memory = True

    def __init__(
        self,
        env_factory: Callable[..., Any],
        n_envs: int = 1,
        env_kwargs: dict[str, Any] | None = None,
        *,
        layout: ProcessLayout = ProcessLayout(),
        options: CageOptions = CageOptions(),
        on_worker_death: str = "raise",
        worker_cpus: Sequence[int] | None = None,
        start_method: str | None = None,
        worker_spin_seconds: float | None = None,
        main_spin_seconds: float = 0.0005,
        start_timeout: float = 120.0,
        step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
    ) -> None:
        super().__init__(env_factory, n_envs, env_kwargs, options)
        self.factory_bytes = check_factory_pickles(env_factory, self.env_kwargs)
        self.on_worker_death = check_death_policy(on_worker_death)
        if not isinstance(layout, ProcessLayout):
            raise ConfigError(
                f"layout must be a ProcessLayout, got {layout!r}: pass "
                "layout=ProcessLayout(n_workers=..., main_process_envs=...)"
            )
        self.layout = layout
        slices = layout.worker_slices(self.n_envs)
        self.worker_cpus = check_cpus(worker_cpus)
        self._balancer = layout.balancer()
        self.rebalance_refusal: str | None = None
        """Why load balancing was switched off (the envs cannot move), or None."""
        self.worker_spin_seconds = (
            -1.0 if worker_spin_seconds is None else float(worker_spin_seconds)
        )
        self.main_spin_seconds = float(main_spin_seconds)
        self.start_timeout = float(start_timeout)
        self.step_timeout = check_step_timeout(step_timeout)
        self._ctx = start_context(start_method)
        check_main_guard(self._ctx.get_start_method())
        # the processes, and everything to release (shared with the finalizer)
        self._resources = SteppingProcesses(
            self.n_envs,
            self.env_offset,
            layout.main_process_envs,
            self.main_spin_seconds,
        )
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._slots = SlotRegistry(self.n_envs)
        self._step_cache: dict[tuple[int, int], _StepEntry] = {}
        self._restarts = 0
        self._settings = GroupSettings(
            ctx=self._ctx,
            env_factory=env_factory,
            env_kwargs=self.env_kwargs,
            factory_bytes=self.factory_bytes,
            options=options,
            spin_seconds=self.worker_spin_seconds,
            cpus=self.worker_cpus,
        )
        try:
            self._finish_init(
                *start_processes(
                    self._resources,
                    self._settings,
                    slices,
                    self.env_seeds,
                    self.start_timeout,
                )
            )
        except BaseException:
            self.close()
            raise

    @property
    def main_process_envs(self) -> int:
        """Envs ``[0, main_process_envs)`` are stepped by the main process."""
        return self._resources.main_process_envs

    @property
    def env_slices(self) -> list[tuple[int, int]]:
        """Cage-local ``[lo, hi)`` env range of each worker."""
        return [worker.env_slice for worker in self._resources.workers]

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and tests)."""
        workers = self._resources.workers
        return [pid for w in workers if (pid := w.process.pid) is not None]

    # -- collecting ------------------------------------------------------------
    def _new_traj(self, env_index: int) -> TrajInfo:
        return self.traj_info_type(env_index=env_index, **self.traj_info_kwargs)

    def _collect(
        self, worker: WorkerHandle, completed: list[TrajInfo], errors: list[WorkerError]
    ) -> None:
        replies = worker.wait(self.main_spin_seconds, self.step_timeout)
        completed += read_episodes(worker.row, self._new_traj)
        for reply in replies:
            if type(reply) is Episodes:
                completed.extend(reply.trajs)
            elif type(reply) is Infos:
                self._last_infos.update(reply.infos)
            elif type(reply) is WorkerError:
                errors.append(reply)

    # -- stepping --------------------------------------------------------------
    def _step_async(self, action: Any, out: Any) -> tuple[Any, Any]:
        # Samplers reuse the same slot objects every batch: remember what was
        # derived from them (slot ids, the main process's views) by identity.
        # The entry holds the objects, so their ids cannot be reused meanwhile.
        key = (id(action), id(out))
        entry = self._step_cache.get(key)
        if entry is None or entry[0] is not action or entry[1] is not out:
            slots = self._slots.register({"action": action, "out": out})
            if len(self._step_cache) >= STEP_CACHE_SIZE:
                self._step_cache.clear()
            # plain views for the main process's share (it steps envs [0, n))
            views = (slots.views["action"], slots.views["out"])
            entry = (action, out, slots.layout_id, slots.ids, views)
            self._step_cache[key] = entry
            messages = slots.messages
        else:
            messages = []
        _, _, layout_id, ids, views = entry
        step = Command.STEP
        for worker in self._resources.workers:
            worker.command(step, messages, ids, layout_id)
        return (out, views)

    def _await_step(self, pending: tuple[Any, Any]) -> list[TrajInfo]:
        out, views = pending
        completed: list[TrajInfo] = []
        errors: list[WorkerError] = []
        main = self._resources.main_group
        main_error = None
        main_seconds = 0.0
        self._last_infos = KeptInfos()
        if main is not None:
            start = time.perf_counter()
            try:
                completed += main.step(*views)
                self._keep_main_infos(main)
            except Exception as exc:  # still collect the workers before raising
                main_error = exc
            main_seconds = time.perf_counter() - start
            self.local_step_seconds += main_seconds
        healthy = True
        workers = list(self._resources.workers)
        for position, worker in enumerate(workers):
            try:
                self._collect(worker, completed, errors)
            except WorkerLost:
                completed += self._handle_death(worker, out)
                healthy = False
            except WorkerTimeout:
                self._time_out("step", workers[position:])
        if main_error is not None:
            raise main_error
        raise_replies(errors)
        if self._balancer is not None and healthy:
            refusal = processes.balance(self._resources, self._balancer, main_seconds)
            if refusal is not None:
                self._balancer, self.rebalance_refusal = None, refusal  # switched off
        return completed

    # -- resetting -------------------------------------------------------------
    def _reset_async(self, request: ResetRequest) -> ResetRequest:
        out_observation, env_indices, seeds, options = request
        slots = self._slots.register({fields.OBSERVATION: out_observation})
        messages: list[Message] = list(slots.messages)
        if seeds is not None or options is not None:
            messages.append(ResetArgs(seeds, options))
        for worker in self._resources.workers:
            if env_indices is None:
                local = None
            else:
                lo, hi = worker.env_slice
                local = [i - lo for i in env_indices if lo <= i < hi]
            worker.command(
                Command.RESET, messages, slots.ids, slots.layout_id,
                reset_extra(local),
            )  # fmt: skip
        # the main process's share is written through the plain views
        return request._replace(out_observation=slots.views[fields.OBSERVATION])

    def _keep_main_infos(self, main: EnvGroup) -> None:
        if self.keep_infos:
            self._last_infos.update(KeptInfos(main.step_infos, main.reset_infos))

    def _await_reset(self, request: ResetRequest) -> None:
        out_observation, env_indices, seeds, options = request
        errors: list[WorkerError] = []
        self._last_infos = KeptInfos()
        main = self._resources.main_group
        if main is not None:
            n = self._resources.main_process_envs
            local = None if env_indices is None else [i for i in env_indices if i < n]
            main.reset(out_observation, local, 0, seeds, options)
            self._keep_main_infos(main)
        workers = list(self._resources.workers)
        for position, worker in enumerate(workers):
            try:
                self._collect(worker, [], errors)
            except WorkerLost:
                self._handle_death(worker, None, out_observation)
            except WorkerTimeout:
                self._time_out("reset", workers[position:])
        raise_replies(errors)

    # -- faults ------------------------------------------------------------------
    def _handle_death(
        self, worker: WorkerHandle, out: Any, out_observation: Any = None
    ) -> list[TrajInfo]:
        """Raise WorkerDiedError, or restart the worker and report its lost episodes."""
        if self.on_worker_death == "raise":
            error = worker.died_error()
            self.close()
            raise error
        self._restarts += 1
        seeds = faults.restarted_seeds(self.env_seeds, worker.env_slice, self._restarts)
        new = faults.restart_worker(
            self._resources,
            worker,
            partial(spawn_worker, self._resources, self._settings, env_seeds=seeds),
            self._slots,
            out[fields.OBSERVATION] if out is not None else out_observation,
            self.start_timeout,
        )
        errors: list[WorkerError] = []
        try:
            self._collect(new, [], errors)
        except WorkerTimeout:
            self._time_out("reset", [new])
        raise_replies(errors)
        if out is None:
            return []
        return faults.lost_episodes(worker, out, self._new_traj)

    def _time_out(self, what: str, pending: list[WorkerHandle]) -> None:
        """Raise StepTimeoutError for ``pending[0]`` and every other late worker.

        Each late worker's Python stack is fetched first; then the cage is
        closed (late workers are terminated at once).
        """
        late = faults.late_workers(pending)
        error = faults.timeout_error(late, what, self.step_timeout)
        for worker in late:
            worker.stop(timeout=0.0)
        self.close()
        raise error

    # -- env access --------------------------------------------------------------
    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]:
        return processes.call_envs(self._resources, name, args, kwargs, indices)

    def _apply(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        indices: list[int],
    ) -> list[Any]:
        return processes.apply_to_envs(self._resources, function, args, kwargs, indices)

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        processes.set_env_attrs(self._resources, name, values, indices)

    def _waiting_envs(self) -> list[int]:
        return processes.waiting_envs(self._resources)

    def _close(self) -> None:
        self._finalizer()
