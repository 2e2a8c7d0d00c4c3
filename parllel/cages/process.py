"""ProcessCage: envs stepped in worker processes, straight into shared memory."""

from __future__ import annotations

import math
import os
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from parllel import fields
from parllel.arrays import Array, NotSharedError, describe_view
from parllel.arrays.views import view_address
from parllel.cages import worker as protocol
from parllel.cages.balance import Balancer, LoadBalancer
from parllel.cages.cage import Cage, check_factory_pickles
from parllel.cages.env_group import EnvGroup
from parllel.cages.main_guard import check_main_guard
from parllel.cages.spaces import EnvSpaces, check_spaces_agree
from parllel.cages.traj_info import TrajInfo
from parllel.cages.workers import (
    WorkerHandle,
    WorkerLost,
    WorkerTimeout,
    default_context,
    raise_replies,
    timeout_error,
)
from parllel.errors import ArrayClosedError, ConfigError, EnvError
from parllel.seeding import restart_seed
from parllel.tree import ArrayDict

DEATH_POLICIES = ("raise", "restart")
DEFAULT_STEP_TIMEOUT = 300.0  # seconds; generous: only a hung env should reach it
STEP_CACHE_SIZE = 4096  # distinct (action, out) slot objects remembered per cage


def flatten_slots(
    tree: Any, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """``(path, ndarray)`` for every leaf of nested mappings (Arrays become views)."""
    kind = type(tree)
    if kind is np.ndarray:
        return [(prefix, tree)]
    if kind is dict or kind is ArrayDict or isinstance(tree, Mapping):
        leaves = []
        for key, value in tree.items():
            leaves += flatten_slots(value, prefix + (str(key),))
        return leaves
    if isinstance(tree, Array):
        tree = tree.to_ndarray()
    return [(prefix, tree)]


def sequence_nodes(
    tree: Any, prefix: tuple[str, ...] = ()
) -> tuple[tuple[str, ...], ...]:
    """Paths of the ArrayDicts in ``tree`` built from tuples (which accept tuples)."""
    if not isinstance(tree, Mapping):
        return ()
    nodes = [prefix] if isinstance(tree, ArrayDict) and tree.is_sequence else []
    for key, value in tree.items():
        nodes += sequence_nodes(value, prefix + (str(key),))
    return tuple(nodes)


def as_views(tree: Any) -> Any:
    """The same nesting (as ArrayDicts) with every Array leaf as a plain ndarray view."""
    if isinstance(tree, Mapping):
        sequence = isinstance(tree, ArrayDict) and tree.is_sequence
        return ArrayDict(
            {key: as_views(value) for key, value in tree.items()}, sequence=sequence
        )
    if isinstance(tree, Array):
        return tree.to_ndarray()
    return tree


def _slot_name(path: tuple[str, ...]) -> str:
    """A slot's path as the user wrote it (``env_info.lives``, ``action``)."""
    return ".".join(path[1:] if path[0] == "out" else path)


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
        cores = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1)
        )
        n_workers = max(1, cores - (1 if n_main else 0))
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


class _Resources:
    """Everything a ProcessCage must release; shared with its GC/exit finalizer."""

    def __init__(self) -> None:
        self.workers: list[WorkerHandle] = []
        self.control: Array | None = None
        self.main_group: EnvGroup | None = None

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


class ProcessCage(Cage):
    """Steps ``n_envs`` envs in worker processes, each holding several envs.

    Workers write observations, rewards, flags and env info straight into the
    shared-memory slots passed to :meth:`step_async` (allocate buffers with
    ``storage="shared"``); per step only a few integers cross the process
    boundary, with one synchronization per worker. The main process can step
    a share of the envs itself while the workers step theirs
    (``main_process_envs``), which is what pays on a 2-core machine with
    cheap envs (see docs/cages.md for figures).

    Args:
        env_factory: picklable callable (cloudpickle) returning a gymnasium env.
        n_envs: number of envs.
        env_kwargs: keyword arguments for ``env_factory``.
        envs_per_worker: envs per worker process (sets the worker count).
        n_workers: worker count if ``envs_per_worker`` is None (default: one
            per core, minus one if the main process steps envs).
        main_process_envs: envs stepped by the main process itself (the first
            ones), inside :meth:`await_step`.
        seed, env_offset, reset_mode, traj_info_type, traj_info_kwargs: as for
            :class:`~parllel.cages.SerialCage`; results are bit-identical to it.
        on_worker_death: ``"raise"`` (:class:`~parllel.errors.WorkerDiedError`)
            or ``"restart"``: recreate the worker's envs, reset them, report
            their episodes as lost (``TrajInfo.lost``, truncated) and go on.
        rebalance: move envs from a persistently slower stepping process to
            its faster neighbour (docs/cages.md; True: a default
            :class:`~parllel.cages.LoadBalancer`; or any object with its
            ``propose`` method). Moved envs are pickled with their state, so
            they must pickle completely (CartPole-like Python envs do;
            ``EzPickle`` envs such as MuJoCo's are detected and balancing is
            switched off with a warning). Results stay bit-identical.
        worker_cpus: CPUs the worker processes may run on (Linux
            ``sched_setaffinity``; default: no pinning). E.g. the two cages of
            an :class:`~parllel.samplers.AlternatingSampler` on a 2-core
            machine share one core while the main process infers on the
            other (:func:`parllel.patterns.build_alternating_cages`).
        start_method: multiprocessing start method (default forkserver).
        worker_spin_seconds: how long an idle worker polls before blocking
            (None: 2 ms while every stepping process of all cages has a
            core, else 0 — never more polling processes than cores).
        main_spin_seconds: how long the main process polls for workers before
            blocking (it yields the CPU while polling).
        start_timeout: seconds to wait for workers to build their envs.
        step_timeout: seconds a worker may take to step (or reset) its envs
            once the main process waits for it (default 300; None: wait
            forever). Past it :class:`~parllel.errors.StepTimeoutError` names
            the worker and its envs and carries the worker's Python stack, and
            the cage is closed. It watches workers only: envs stepped in the
            main process (``main_process_envs``) run in your own process,
            where Ctrl-C interrupts a hang and shows its traceback.

    Example:
        >>> with ProcessCage(make_env, n_envs=8, envs_per_worker=4, seed=0) as cage:
        ...     cage.reset(sample_tree.observation[0])
    """

    needs_shared_memory = True

    def __init__(
        self,
        env_factory: Callable[..., Any],
        n_envs: int = 1,
        env_kwargs: dict[str, Any] | None = None,
        *,
        envs_per_worker: int | None = None,
        n_workers: int | None = None,
        main_process_envs: int = 0,
        seed: int | Sequence[int] | None = None,
        env_offset: int = 0,
        reset_mode: str = "auto",
        traj_info_type: Callable[..., TrajInfo] = TrajInfo,
        traj_info_kwargs: dict[str, Any] | None = None,
        on_worker_death: str = "raise",
        rebalance: bool | Balancer = False,
        worker_cpus: Sequence[int] | None = None,
        start_method: str | None = None,
        worker_spin_seconds: float | None = None,
        main_spin_seconds: float = 0.0005,
        start_timeout: float = 120.0,
        step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
    ) -> None:
        super().__init__(
            env_factory,
            n_envs,
            env_kwargs,
            seed,
            env_offset,
            reset_mode,
            traj_info_type,
            traj_info_kwargs,
        )
        self.factory_bytes = check_factory_pickles(env_factory, self.env_kwargs)
        if on_worker_death not in DEATH_POLICIES:
            raise ConfigError(
                f"on_worker_death must be one of {DEATH_POLICIES}, got {on_worker_death!r}"
            )
        if not 0 <= main_process_envs < self.n_envs:
            raise ConfigError(
                f"main_process_envs must be in [0, n_envs), got {main_process_envs}"
            )
        self.main_process_envs = int(main_process_envs)
        self.env_slices = split_envs(
            self.n_envs, self.main_process_envs, envs_per_worker, n_workers
        )
        self.on_worker_death = on_worker_death
        self.worker_cpus = check_cpus(worker_cpus)
        if not isinstance(rebalance, bool) and not callable(
            getattr(rebalance, "propose", None)
        ):
            raise ConfigError(
                "rebalance must be True/False or an object with a propose(seconds, "
                f"counts) method (e.g. LoadBalancer()), got {rebalance!r}"
            )
        self._balancer: Balancer | None = (
            (LoadBalancer() if rebalance else None)
            if isinstance(rebalance, bool)
            else rebalance
        )
        self.worker_spin_seconds = (
            -1.0 if worker_spin_seconds is None else float(worker_spin_seconds)
        )
        self.main_spin_seconds = float(main_spin_seconds)
        self.start_timeout = float(start_timeout)
        if step_timeout is not None and not step_timeout > 0:
            raise ConfigError(
                f"step_timeout must be > 0 seconds or None, got {step_timeout}"
            )
        self.step_timeout = None if step_timeout is None else float(step_timeout)
        self._ctx = (
            default_context()
            if start_method is None
            else (__import__("multiprocessing").get_context(start_method))
        )
        check_main_guard(self._ctx.get_start_method())
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._view_ids: dict[tuple, int] = {}
        self._descriptors: list[tuple[int, Any]] = []
        self._layout_ids: dict[tuple, int] = {}
        self._step_cache: dict[tuple[int, int], tuple] = {}
        self._restarts = 0
        self._pending: tuple | None = None
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -- start-up ------------------------------------------------------------
    def _group_kwargs(
        self, lo: int, hi: int, env_seeds: Sequence[int] | None
    ) -> dict[str, Any]:
        return {
            "env_indices": tuple(self.env_offset + i for i in range(lo, hi)),
            "env_seeds": None if env_seeds is None else tuple(env_seeds[lo:hi]),
            "reset_mode": self.reset_mode,
            "traj_info_type": self.traj_info_type,
            "traj_info_kwargs": self.traj_info_kwargs,
        }

    def _spawn(
        self, index: int, env_seeds: Sequence[int] | None, want_example: bool
    ) -> WorkerHandle:
        lo, hi = self.env_slices[index]
        return WorkerHandle(
            self._ctx,
            index,
            self._resources.control,
            (lo, hi),
            tuple(self.env_offset + i for i in range(lo, hi)),
            self.factory_bytes,
            self._group_kwargs(lo, hi, env_seeds),
            self.worker_spin_seconds,
            want_example,
            self.worker_cpus,
        )

    def _start(self) -> None:
        resources = self._resources
        resources.control = Array(
            (len(self.env_slices),),
            (protocol.CONTROL_WIDTH,),
            np.int64,
            storage="shared",
        )
        main = self.main_process_envs
        for index in range(len(self.env_slices)):
            resources.workers.append(
                self._spawn(index, self.env_seeds, index == 0 and not main)
            )
        example = None
        if main:
            resources.main_group = EnvGroup(
                self.env_factory,
                self.env_kwargs,
                **self._group_kwargs(0, main, self.env_seeds),
            )
            spaces = resources.main_group.spaces
            example = resources.main_group.example_step()
        for worker in resources.workers:
            try:
                worker_spaces, worker_example = worker.handshake(self.start_timeout)
            except WorkerLost as lost:
                raise lost.worker.died_error(starting=True) from None
            if example is None:
                spaces, example = worker_spaces, worker_example
            check_spaces_agree(spaces, worker_spaces, worker.env_indices[0])
        self._finish_init(EnvSpaces(*spaces), example)

    # -- dispatch --------------------------------------------------------------
    def _slot_ids(self, tree: dict[str, Any]) -> tuple[int, np.ndarray, list]:
        """Layout id, view ids and new-descriptor messages for a tree of slots.

        The layout holds the leaf paths and the paths of tuple-built nodes, so
        a worker rebuilds the same tree (one that accepts tuples where the
        caller's does).
        """
        messages: list[tuple] = []
        leaves = flatten_slots(tree)
        layout = (tuple(path for path, _ in leaves), sequence_nodes(tree))
        layout_id = self._layout_ids.get(layout)
        if layout_id is None:
            if len(leaves) > protocol.MAX_LEAVES:
                raise ConfigError(f"too many slot leaves ({len(leaves)}) for one step")
            layout_id = self._layout_ids[layout] = len(self._layout_ids)
            messages.append(("layout", layout_id, layout))
        ids = np.empty(len(leaves), np.int64)
        new = []
        for j, (path, view) in enumerate(leaves):
            if path[0] != "action" and not view.flags.writeable:
                raise ArrayClosedError(
                    f"step slot {_slot_name(path)!r} is read-only: its Array was "
                    "closed (close() released its shared memory), so workers "
                    "cannot write into it"
                )
            key = (view_address(view), view.shape, view.strides, view.dtype.char)
            view_id = self._view_ids.get(key)
            if view_id is None:
                if view.ndim == 0 or view.shape[0] != self.n_envs:
                    raise ConfigError(
                        f"slot {_slot_name(path)!r} has shape {view.shape}; its "
                        f"leading dimension must be the cage's {self.n_envs} envs"
                    )
                try:
                    descriptor = describe_view(view)
                except NotSharedError as exc:
                    raise NotSharedError(
                        f"slot {_slot_name(path)!r}: {exc}. ProcessCage workers "
                        "write straight into the buffer"
                    ) from None
                except ArrayClosedError as exc:
                    raise ArrayClosedError(
                        f"slot {_slot_name(path)!r}: {exc}"
                    ) from None
                view_id = self._view_ids[key] = len(self._view_ids)
                new.append((view_id, descriptor))
                self._descriptors.append((view_id, descriptor))
            ids[j] = view_id
        if new:
            messages.append(("views", new))
        return layout_id, ids, messages

    def _dispatch(
        self, command: int, tree: dict[str, Any], extra_per_worker=None
    ) -> None:
        layout_id, ids, messages = self._slot_ids(tree)
        for worker in self._resources.workers:
            extra = None if extra_per_worker is None else extra_per_worker(worker)
            worker.command(command, messages, ids, layout_id, extra)

    def _new_traj(self, env_index: int) -> TrajInfo:
        return self.traj_info_type(env_index=env_index, **self.traj_info_kwargs)

    def _collect(self, worker: WorkerHandle, completed: list, errors: list) -> None:
        replies = worker.wait(self.main_spin_seconds, self.step_timeout)
        completed += protocol.read_episodes(worker.row, self._new_traj)
        for reply in replies:
            if reply[0] == "trajs":
                completed.extend(reply[1])
            elif reply[0] == "error":
                errors.append(reply)

    # -- stepping --------------------------------------------------------------
    def _step_async(self, action: Any, out: Any) -> None:
        # Samplers reuse the same slot objects every batch: remember what was
        # derived from them (slot ids, the main process's share) by identity.
        # The entry holds the objects, so their ids cannot be reused meanwhile.
        key = (id(action), id(out))
        entry = self._step_cache.get(key)
        if entry is None or entry[0] is not action or entry[1] is not out:
            layout_id, ids, messages = self._slot_ids({"action": action, "out": out})
            if len(self._step_cache) >= STEP_CACHE_SIZE:
                self._step_cache.clear()
            # plain views for the main process's share (it steps envs [0, n))
            views = (
                (as_views(action), as_views(out))
                if self._resources.main_group is not None
                else None
            )
            entry = self._step_cache[key] = (action, out, layout_id, ids, views)
        else:
            messages = []
        _, _, layout_id, ids, views = entry
        for worker in self._resources.workers:
            worker.command(protocol.STEP, messages, ids, layout_id)
        self._pending = (out, views)

    def _await_step(self) -> list[TrajInfo]:
        out, views = self._pending
        self._pending = None
        completed: list[TrajInfo] = []
        errors: list[tuple] = []
        main = self._resources.main_group
        main_error = None
        main_seconds = 0.0
        if main is not None:
            start = time.perf_counter()
            try:
                completed += main.step(*views)
            except Exception as exc:  # still collect the workers before raising
                main_error = exc
            main_seconds = time.perf_counter() - start
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
            self._balance(main_seconds)
        return completed

    # -- load balancing ----------------------------------------------------------
    def _stepping(self) -> list[tuple[WorkerHandle | None, int, int]]:
        """``(worker or None for the main process, lo, hi)`` in env order."""
        share = [(None, 0, self.main_process_envs)] if self.main_process_envs else []
        return share + [(w, *w.env_slice) for w in self._resources.workers]

    def _balance(self, main_seconds: float) -> None:
        stepping = self._stepping()
        seconds = [
            main_seconds
            if worker is None
            else float(worker.row_floats[protocol.STEP_SECONDS])
            for worker, _, _ in stepping
        ]
        move = self._balancer.propose(seconds, [hi - lo for _, lo, hi in stepping])
        if move is not None:
            self._move_envs(stepping, *move)

    def _move_envs(self, stepping: list, giver: int, taker: int, count: int) -> None:
        """Move ``count`` envs between neighbouring stepping processes (order kept)."""
        if abs(giver - taker) != 1 or min(giver, taker) < 0:
            raise ConfigError(f"cannot move envs from process {giver} to {taker}")
        _, lo, hi = stepping[giver]
        if not 0 < count < hi - lo:
            raise ConfigError(
                f"cannot move {count} of process {giver}'s {hi - lo} envs: it keeps "
                "at least one"
            )
        first = giver > taker  # the giver's first envs go to its left neighbour
        give, take = stepping[giver][0], stepping[taker][0]
        try:
            payloads = self._env_request(give, ("give", first, count))
        except EnvError as exc:  # unpicklable env: keep the current split
            warnings.warn(
                f"ProcessCage load balancing switched off: {exc}", stacklevel=3
            )
            self._balancer = None
            return
        try:
            self._env_request(take, ("take", payloads, not first))
        except EnvError:
            self._env_request(give, ("take", payloads[::-1], first))  # give back
            raise
        ranges = [[lo, hi] for _, lo, hi in stepping]
        if first:
            ranges[giver][0] += count
            ranges[taker][1] += count
        else:
            ranges[giver][1] -= count
            ranges[taker][0] -= count
        for (worker, _, _), (lo, hi) in zip(stepping, ranges):
            if worker is None:
                self.main_process_envs = hi
            else:
                worker.env_slice = (lo, hi)
                worker.env_indices = tuple(self.env_offset + i for i in range(lo, hi))
                self.env_slices[worker.index] = (lo, hi)

    def _env_request(self, worker: WorkerHandle | None, message: tuple) -> Any:
        """Run a give/take ``message`` in the main process's group or a worker."""
        if worker is not None:
            return self._request(worker, message)
        main = self._resources.main_group
        try:
            if message[0] == "give":
                return main.give_envs(message[1], message[2])
            return main.take_envs(message[1], message[2])
        except Exception as exc:
            raise EnvError(f"in the main process: {type(exc).__name__}: {exc}") from exc

    def _request(self, worker: WorkerHandle, message: tuple) -> Any:
        """Send one message to an idle worker and return its result."""
        worker.command(protocol.MESSAGES_ONLY, [message], np.empty(0, np.int64), 0)
        try:
            replies = raise_replies(worker.wait(self.main_spin_seconds))
        except WorkerLost:
            raise worker.died_error() from None
        return replies[0][1]

    # -- resetting -------------------------------------------------------------
    def _reset_async(self, out_observation: Any, env_indices: list[int] | None) -> None:
        def extra(worker: WorkerHandle) -> list[int]:
            if env_indices is None:
                return [-1]
            lo, hi = worker.env_slice
            local = [i - lo for i in env_indices if lo <= i < hi]
            return [len(local)] + local

        self._dispatch(protocol.RESET, {"observation": out_observation}, extra)
        self._pending = (out_observation, env_indices)

    def _await_reset(self) -> None:
        out_observation, env_indices = self._pending
        self._pending = None
        errors: list[tuple] = []
        main = self._resources.main_group
        if main is not None:
            n = self.main_process_envs
            local = None if env_indices is None else [i for i in env_indices if i < n]
            main.reset(as_views(out_observation), local)
        workers = list(self._resources.workers)
        for position, worker in enumerate(workers):
            try:
                self._collect(worker, [], errors)
            except WorkerLost:
                self._handle_death(worker, None, out_observation)
            except WorkerTimeout:
                self._time_out("reset", workers[position:])
        raise_replies(errors)

    # -- worker death ----------------------------------------------------------
    def _handle_death(
        self, worker: WorkerHandle, out: Any, out_observation: Any = None
    ) -> list[TrajInfo]:
        """Raise WorkerDiedError, or restart the worker and report its lost episodes."""
        if self.on_worker_death == "raise":
            error = worker.died_error()
            self.close()
            raise error
        self._restarts += 1
        seeds = self.env_seeds
        if seeds is not None:  # fresh envs: new seeds, derived from the old ones
            lo, hi = worker.env_slice
            seeds = tuple(
                restart_seed(s, self._restarts) if lo <= i < hi else s
                for i, s in enumerate(seeds)
            )
        worker.stop()
        new = self._spawn(worker.index, seeds, want_example=False)
        self._resources.workers[worker.index] = new
        try:
            new.handshake(self.start_timeout)
        except WorkerLost as lost:
            raise lost.worker.died_error(starting=True) from None
        # teach the new worker every slot known so far, then reset its envs
        messages = [("layout", i, layout) for layout, i in self._layout_ids.items()]
        messages.append(("views", list(self._descriptors)))
        observation = out[fields.OBSERVATION] if out is not None else out_observation
        layout_id, ids, more = self._slot_ids({"observation": observation})
        new.command(protocol.RESET, messages + more, ids, layout_id, [-1])
        errors: list[tuple] = []
        try:
            self._collect(new, [], errors)
        except WorkerTimeout:
            self._time_out("reset", [new])
        raise_replies(errors)
        lost = []
        if out is not None:
            lo, hi = worker.env_slice
            out[fields.REWARD][lo:hi] = 0
            out[fields.TERMINATED][lo:hi] = False
            out[fields.TRUNCATED][lo:hi] = True
            for env_index in worker.env_indices:
                traj = self.traj_info_type(env_index=env_index, **self.traj_info_kwargs)
                traj.lost = traj.truncated = True
                lost.append(traj)
        return lost

    # -- hung workers ----------------------------------------------------------
    def _time_out(self, what: str, pending: list[WorkerHandle]) -> None:
        """Raise StepTimeoutError for ``pending[0]`` and every other late worker.

        Each late worker's Python stack is fetched first; then the cage is
        closed (late workers are terminated at once).
        """
        late = [pending[0]]
        late += [w for w in pending[1:] if not w.work_done.acquire(False)]
        error = timeout_error(late, what, self.step_timeout)
        for worker in late:
            worker.stop(timeout=0.0)
        self.close()
        raise error

    # -- env access --------------------------------------------------------------
    def _owner(self, index: int) -> tuple[Any, int]:
        if index < self.main_process_envs:
            return None, index
        for worker in self._resources.workers:
            lo, hi = worker.env_slice
            if lo <= index < hi:
                return worker, index - lo
        raise ConfigError(f"env index {index} out of range for {self.n_envs} envs")

    def _ask(
        self,
        per_env_message: Callable[[list[int]], tuple],
        run_main: Callable[[list[int]], Any],
        indices: list[int],
    ) -> dict[int, Any]:
        """Send a request to the owners of ``indices``; return results by index."""
        by_owner: dict[Any, list[tuple[int, int]]] = {}
        for index in indices:
            owner, local = self._owner(index)
            by_owner.setdefault(owner, []).append((index, local))
        results: dict[int, Any] = {}
        for owner, pairs in by_owner.items():
            locals_ = [local for _, local in pairs]
            if owner is None:
                values = run_main(locals_)
            else:
                values = self._request(owner, per_env_message(locals_))
            if values is not None:
                results.update(
                    {index: value for (index, _), value in zip(pairs, values)}
                )
        return results

    def _call(
        self, name: str, args: tuple, kwargs: dict, indices: list[int]
    ) -> list[Any]:
        main = self._resources.main_group
        results = self._ask(
            lambda local: ("call", name, args, kwargs, local),
            lambda local: main.call(name, args, kwargs, local),
            indices,
        )
        return [results[i] for i in indices]

    def _set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        main = self._resources.main_group
        value_of = dict(zip(indices, values))
        for worker in [None, *self._resources.workers]:
            owned = [i for i in indices if self._owner(i)[0] is worker]
            if not owned:
                continue
            local = [self._owner(i)[1] for i in owned]
            vals = [value_of[i] for i in owned]
            if worker is None:
                main.set_attr(name, vals, local)
            else:
                self._ask(lambda loc, v=vals: ("set_attr", name, v, loc), None, owned)

    def _waiting_envs(self) -> list[int]:
        main = self._resources.main_group
        waiting = list(main.waiting()) if main is not None else []
        for worker in self._resources.workers:
            local = self._request(worker, ("waiting",))
            waiting += [worker.env_slice[0] + i for i in local]
        return sorted(waiting)

    def _close(self) -> None:
        self._finalizer()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and tests)."""
        return [w.process.pid for w in self._resources.workers]
