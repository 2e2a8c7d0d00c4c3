"""RaySampler: N Ray actors, each a complete local sampler, one remote call per batch.

Each actor builds its own sampler with ``build_sampler(actor_index, *args)``
and answers a request with one whole ``[T, B_i]`` batch, which the learner
copies into the columns of its ``[T, sum B_i]`` tree;
:meth:`RaySampler.collect_batch` returns a
:class:`~parllel.samplers.BackgroundBatch`, as a background sampler does.
The sampler also publishes the weights through Ray's object store, with the
background sampler's bound on policy lag (docs/distributed.md, "Weights and
policy lag").
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parllel.distributed.actor import ActorBatch, SamplerActor, weights_of
from parllel.distributed.actor_pool import ActorPool
from parllel.distributed.faults import (
    is_actor_death,
    is_final_death,
)
from parllel.distributed.layout import allocate_local, copy_columns, joined_layout
from parllel.distributed.lifetime import check_config, shutdown
from parllel.distributed.ray_runtime import connect, import_ray, node_affinity
from parllel.distributed.requests import RequestQueues
from parllel.errors import (
    ConfigError,
    PolicyLagError,
)
from parllel.samplers.background_batch import BackgroundBatch, checked_batch
from parllel.samplers.protocols import AsyncSampler
from parllel.timing import PhaseTimes
from parllel.tree import ArrayDict


class RaySampler(AsyncSampler):
    """N Ray actors that each run a local sampler and return whole batches.

    Args:
        build_sampler: picklable ``build_sampler(actor_index, *args)`` returning
            a complete local sampler over that actor's envs (give actor ``i``
            disjoint seeds with ``env_offset``; see docs/distributed.md).
        max_lag: batch ``n`` uses policy version ``>= v0 + n - max_lag``
            (0: synchronous, None: no bound).
        modules: ``{name: nn.Module}`` of the learner's policy, named as
            :func:`~parllel.torch.weights.agent_modules` does; None: no weights.
        address: a Ray cluster to join (``"auto"``); None: a local Ray.
        node_ids: one Ray node id per actor (hard affinity), or None.
        timeout_seconds: a batch late by this long is warned about and counted.
        max_in_flight: requests waiting at each actor (default ``max_lag + 1``).

    Attributes:
        restarts: actors Ray restarted (also ``dropped_batches``,
            ``timeouts``: docs/distributed.md, "Faults and counters").

    Example:
        >>> with RaySampler(build_sampler, n_actors=2, modules={"model": agent.model}) as sampler:
        ...     runner = OnPolicyRunner(sampler, ppo, total_steps, publisher=sampler)
        ...     runner.run()
    """

    def __init__(
        self,
        build_sampler: Callable[..., Any],
        *args: Any,
        n_actors: int = 2,
        max_lag: int | None = 0,
        modules: Mapping[str, Any] | None = None,
        address: str | None = None,
        num_cpus_per_actor: float = 1,
        node_ids: Sequence[str] | None = None,
        max_restarts: int = 0,
        start_timeout: float | None = 600.0,
        timeout_seconds: float | None = None,
        max_in_flight: int | None = None,
        close_timeout: float = 10.0,
        actor_options: Mapping[str, Any] | None = None,
    ) -> None:
        check_config(
            n_actors,
            max_lag,
            max_restarts,
            start_timeout,
            timeout_seconds,
            num_cpus_per_actor,
            node_ids,
            max_in_flight,
        )
        self.n_actors = int(n_actors)
        self.max_lag = None if max_lag is None else int(max_lag)
        self.max_restarts = int(max_restarts)
        default_in_flight = 2 if self.max_lag is None else self.max_lag + 1
        self.max_in_flight = int(max_in_flight or default_in_flight)
        self.phase_times = PhaseTimes()
        self._modules = None if modules is None else dict(modules)
        self._closed = False
        self._started = False
        self._version = 0
        self._base = 0
        self._weights_ref: Any = None
        self._batches = 0
        self._requests = RequestQueues(self.n_actors, self.max_in_flight, self._request)
        self._infos: dict[int, tuple[int, str | None]] = {}
        self._ray = import_ray()
        ray = self._ray
        cpus = max(1, math.ceil(self.n_actors * float(num_cpus_per_actor)))
        started_ray = connect(address, cpus)
        self._actors: list[Any] = []
        self._finalizer = weakref.finalize(
            self, shutdown, ray, self._actors, self._infos, started_ray, close_timeout
        )
        self._pool = ActorPool(
            ray,
            self._actors,
            self._infos,
            max_restarts=self.max_restarts,
            start_timeout=start_timeout,
            timeout_seconds=timeout_seconds,
            close=self.close,
        )
        try:
            remote = ray.remote(SamplerActor)
            for index in range(self.n_actors):
                options: dict[str, Any] = {
                    "num_cpus": num_cpus_per_actor,
                    "max_restarts": self.max_restarts,
                    "max_task_retries": 0,
                    **dict(actor_options or {}),
                }
                if node_ids is not None:
                    options["scheduling_strategy"] = node_affinity(node_ids[index])
                self._actors.append(
                    remote.options(**options).remote(build_sampler, index, args)
                )
            infos = [self._pool.describe(index) for index in range(self.n_actors)]
            layout, self._columns = joined_layout([info.layout for info in infos])
            self._sample_tree: ArrayDict = allocate_local(layout)
            self._leaves = [leaf for _, leaf in self._sample_tree.items_flat()]
            self._states: list[dict[str, Any] | None] = [info.state for info in infos]
            self._pool.incarnations = [info.incarnation for info in infos]
            self._pool.node_ids = [info.node_id for info in infos]
            if self._modules is not None:
                self._put_weights()
        except BaseException:
            self.close()
            raise

    @property
    def sample_tree(self) -> ArrayDict:
        """The learner's ``[T, sum B_i]`` tree each batch is copied into."""
        return self._sample_tree

    @property
    def started(self) -> bool:
        """Whether sampling started (at the first :meth:`collect_batch`)."""
        return self._started

    @property
    def start_timeout(self) -> float | None:
        """Seconds an actor may take to build its sampler (its pool's; settable)."""
        return self._pool.start_timeout

    @start_timeout.setter
    def start_timeout(self, seconds: float | None) -> None:
        self._pool.start_timeout = seconds

    @property
    def timeout_seconds(self) -> float | None:
        """Seconds one batch may take (its pool's)."""
        return self._pool.timeout_seconds

    @property
    def restarts(self) -> int:
        """Actors Ray restarted after they died."""
        return self._pool.restarts

    @property
    def dropped_batches(self) -> int:
        """Actor batches lost with an actor that died (each collected again)."""
        return self._pool.dropped_batches

    @property
    def timeouts(self) -> int:
        """Batches reported for exceeding ``timeout_seconds``."""
        return self._pool.timeouts

    @property
    def node_ids(self) -> list[str | None] | None:
        """The node each actor runs on."""
        return self._pool.node_ids

    def fault_counts(self) -> dict[str, int]:
        """``restarts``, ``dropped_batches`` and ``timeouts`` so far."""
        return {
            "restarts": self.restarts,
            "dropped_batches": self.dropped_batches,
            "timeouts": self.timeouts,
        }

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles (actor ``i`` fills columns ``columns[i]``)."""
        return list(self._actors)

    @property
    def actor_pids(self) -> list[int]:
        """Each actor's process id (a new one after a restart, once it answered)."""
        return [self._infos[index][0] for index in range(self.n_actors)]

    @property
    def columns(self) -> list[slice]:
        """Each actor's columns of :attr:`sample_tree`."""
        return list(self._columns)

    # -- weights -----------------------------------------------------------
    def _put_weights(self) -> None:
        assert self._modules is not None
        self._weights_ref = self._ray.put(weights_of(self._modules))

    def publish_weights(self) -> int:
        """Put the current weights of ``modules`` in the object store as the
        next version (one ``ray.put``); return the version.

        Raises:
            ConfigError: the sampler was built without ``modules``.
        """
        if self._modules is None:
            raise ConfigError("publish_weights needs RaySampler(..., modules=...)")
        self._put_weights()
        self._version += 1
        if self._started and not self._closed:
            self._submit()
        return self._version

    @property
    def follows_weights(self) -> bool:
        """Whether the actors follow published weights (built with ``modules``):
        then :meth:`publish_weights` must run once per batch (a runner's
        ``publisher=``)."""
        return self._modules is not None

    @property
    def policy_version(self) -> int | None:
        """The newest published version (None without ``modules``)."""
        return None if self._modules is None else self._version

    # -- requests ----------------------------------------------------------
    def _allowed(self, number: int) -> bool:
        if self.max_lag is None or self._modules is None:
            return True
        return self._version >= self._base + number - self.max_lag

    def _request(self, index: int) -> Any:
        box = [] if self._weights_ref is None else [self._weights_ref]
        # a restarted actor continues from its newest state the learner received
        return self._actors[index].collect.remote(
            box, self._version, self._states[index]
        )

    def _submit(self) -> None:
        """Send every request the lag and ``max_in_flight`` allow."""
        self._requests.fill(self._allowed)

    def in_flight(self) -> list[int]:
        """Requests sent and not yet returned, per actor."""
        return self._requests.in_flight()

    def _actor_restarting(self, index: int) -> None:
        """A request failed because the actor died and Ray restarts it: count
        its batch as dropped, wait until the restarted actor built its
        sampler and send it the actor's requests again."""
        self._pool.dropped_batches += 1
        self._pool.await_restart(index)
        self._requests.send_again(index)

    def _receive(self, index: int, number: int) -> ActorBatch:
        ray = self._ray
        while True:
            oldest = self._requests.oldest(index)
            if oldest is None or oldest[0] != number:
                raise PolicyLagError(
                    f"deadlock: batch {number} needs policy version "
                    f"{self._base + number - (self.max_lag or 0)} (max_lag="
                    f"{self.max_lag}), the newest is {self._version}; publish the "
                    "weights once per collected batch (publish_weights(), or the "
                    "runner's publisher=)"
                )
            ref = oldest[1]
            self._pool.wait(ref, index, f"returned batch {number}")
            try:
                result: ActorBatch = ray.get(ref)
            except Exception as error:
                if is_actor_death(ray, error) and not is_final_death(ray, error):
                    self._actor_restarting(index)
                    continue
                self._pool.fail(index, error)
            self._requests.answered(index)
            self._pool.note_incarnation(index, result)
            return result

    # -- batches -----------------------------------------------------------
    def collect_batch(self, learner_version: int | None = None) -> BackgroundBatch:
        """Return the next batch, all actors' columns filled.

        The tree is :attr:`sample_tree` (overwritten by the next call). With
        ``learner_version`` the batch's lag is computed and checked.

        Raises:
            DistributedSamplerError: an actor's sampler raised (its traceback
                attached); :class:`~parllel.errors.DistributedSamplerError`
                when an actor died more than ``max_restarts`` times.
            PolicyLagError: the lag exceeds ``max_lag``, or the batch waits
                for a version the learner has not published.
        """
        if self._closed:
            raise ConfigError("the RaySampler is closed")
        if not self._started:
            self._started = True
            self._base = self._version
        number = self._batches
        self._submit()
        results = [self._receive(index, number) for index in range(self.n_actors)]
        for index, result in enumerate(results):
            copy_columns(self._leaves, result.arrays, self._columns[index])
            self._states[index] = result.state
            self.phase_times.merge(result.phase_times)
        self._batches += 1
        self._submit()  # the actors go on while the learner trains
        version = min(result.policy_version for result in results)
        completed = [info for result in results for info in result.completed]
        state = self.state_dict()
        return checked_batch(
            self._sample_tree,
            completed,
            version,
            number,
            state,
            learner_version,
            self.max_lag,
        )

    # -- state -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Each actor's transform and observation-normalizer state
        (``{"actors": [state_0, ...]}``) as of the newest batch (before the
        first: what :meth:`load_state_dict` was given, else as built)."""
        return {"actors": [dict(state or {}) for state in self._states]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Give each actor the transform state to start from (resuming a run).

        Raises:
            ConfigError: sampling already started, or the state is for
                another number of actors.
        """
        self._refuse_started("load_state_dict")
        states = list(state.get("actors", ()))
        if len(states) != self.n_actors:
            raise ConfigError(
                f"the state holds {len(states)} actors' states, the RaySampler "
                f"has {self.n_actors} actors"
            )
        self._states = [dict(actor_state) for actor_state in states]

    # -- lifetime ----------------------------------------------------------
    def close(self) -> None:
        """Close the actors' samplers, kill the actors, and shut Ray down if
        this sampler started it. Idempotent; also runs at garbage
        collection and exit."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> RaySampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
